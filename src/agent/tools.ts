import { spawn } from 'node:child_process'
import { lstat, mkdir, readFile, realpath, stat, writeFile } from 'node:fs/promises'
import { dirname, isAbsolute, relative, resolve, sep } from 'node:path'
import { capChanges, type FileChange, FileWatch, scanTree } from './file-watch.js'
import type { ToolSpec } from './model.js'
import { TASK_OUTCOME_STATUSES, type TaskStatus } from '../contract/agent-task.js'

/** Output the model sees from one tool call, at most. The rest is cut with a marker. */
export const OUTPUT_CAP = 32 * 1024
const DEFAULT_TIMEOUT_S = 120
const MAX_TIMEOUT_S = 1800

export const TOOL_SPECS: ToolSpec[] = [
  {
    name: 'run_command',
    description: 'Run a shell command (/bin/sh -c) in the workspace directory. Returns exit code and combined output (truncated).',
    input_schema: {
      type: 'object',
      properties: {
        command: { type: 'string', description: 'The shell command line.' },
        timeout_seconds: { type: 'integer', minimum: 1, maximum: MAX_TIMEOUT_S, description: `Default ${DEFAULT_TIMEOUT_S}.` },
      },
      required: ['command'],
    },
  },
  {
    name: 'read_file',
    description: 'Read a UTF-8 text file under the workspace directory (path relative to it, or absolute inside it).',
    input_schema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
  },
  {
    name: 'write_file',
    description: 'Create or overwrite a text file under the workspace directory; parent directories are created.',
    input_schema: {
      type: 'object',
      properties: { path: { type: 'string' }, content: { type: 'string' } },
      required: ['path', 'content'],
    },
  },
  {
    name: 'finish',
    description: 'End the task. Call exactly once when the work is done (or cannot be done), with a short summary for the user.',
    input_schema: {
      type: 'object',
      properties: {
        summary: { type: 'string' },
        status: { type: 'string', enum: [...TASK_OUTCOME_STATUSES], description: 'Default completed.' },
      },
      required: ['summary'],
    },
  },
]

export interface ToolOutcome {
  output: string
  isError: boolean
  /** Files the call changed (one file_change event each): write_file's own, or a shell command's diff. */
  fileChanges?: FileChange[]
  /** The change scan hit its entry limit: paths past it were not compared. */
  scanTruncated?: boolean
  /** Set when /data is over its disk quota after the call: the task fails. */
  diskOver?: DiskUsage
  /** Set by finish. */
  finish?: { summary: string; status: TaskStatus }
}

export interface DiskUsage {
  usedBytes: number
  quotaBytes: number
}

export interface ToolboxOptions {
  /** Allocated bytes /data may hold; checked after each shell command, write and task. Default none. */
  diskQuotaBytes?: number
  /** Entries a change scan records at most (default file-watch MAX_SCAN_ENTRIES). */
  maxScanEntries?: number
}

/** The agent's state directory inside /data (conversation file): bookkeeping, not the user's files. */
const AGENT_STATE_DIR = '.corral'

/** Toolbox options from the workspace environment the runtime sets (CORRAL_WORKSPACE_DISK_MB). */
export function toolboxOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): ToolboxOptions {
  const mb = Number(env.CORRAL_WORKSPACE_DISK_MB)
  return Number.isFinite(mb) && mb > 0 ? { diskQuotaBytes: Math.floor(mb * 1024 * 1024) } : {}
}

/** Runs the agent's tools confined to one directory (/data in a workspace). */
export class Toolbox {
  readonly root: string
  readonly #options: ToolboxOptions
  readonly #watch: FileWatch

  constructor(root: string, options: ToolboxOptions = {}) {
    this.root = resolve(root)
    this.#options = options
    this.#watch = new FileWatch(this.root, {
      skipTopLevel: [AGENT_STATE_DIR],
      countAllBytes: options.diskQuotaBytes !== undefined,
      ...(options.maxScanEntries !== undefined ? { maxEntries: options.maxScanEntries } : {}),
    })
  }

  /** /data's disk quota in bytes, when one is set. */
  get diskQuotaBytes(): number | undefined {
    return this.#options.diskQuotaBytes
  }

  /** A new task: shell changes are compared from a fresh scan (the control plane may have added uploads). */
  beginTask(): void {
    this.#watch.reset()
  }

  /** /data's usage when it is over the quota; null when under it or no quota is set. */
  async diskOver(): Promise<DiskUsage | null> {
    const quotaBytes = this.#options.diskQuotaBytes
    if (quotaBytes === undefined) return null
    const { bytes } = await scanTree(this.root, { maxEntries: 0, countAllBytes: true })
    return bytes > quotaBytes ? { usedBytes: bytes, quotaBytes } : null
  }

  async run(name: string, input: Record<string, unknown>, signal?: AbortSignal): Promise<ToolOutcome> {
    try {
      switch (name) {
        case 'run_command':
          return await this.#runCommand(input, signal)
        case 'read_file':
          return await this.#readFile(input)
        case 'write_file':
          return await this.#writeFile(input)
        case 'finish': {
          const summary = typeof input.summary === 'string' ? input.summary : ''
          const status = input.status === 'failed' ? 'failed' : 'completed'
          return { output: 'Task finished.', isError: false, finish: { summary, status } }
        }
        default:
          return { output: `Unknown tool ${JSON.stringify(name)}. Available: ${TOOL_SPECS.map((t) => t.name).join(', ')}.`, isError: true }
      }
    } catch (err) {
      return { output: (err as Error).message, isError: true }
    }
  }

  /**
   * Resolves a model-given path inside the root, refusing `..` escapes and symlinks that lead out
   * (checked on the deepest existing ancestor, so a not-yet-created file is covered too).
   */
  async resolveInside(path: unknown): Promise<string> {
    if (typeof path !== 'string' || path === '') throw new Error('path must be a non-empty string')
    const target = isAbsolute(path) ? resolve(path) : resolve(this.root, path)
    if (!inside(this.root, target)) throw new Error(`path ${path} is outside the workspace directory ${this.root}`)
    let existing = target
    for (;;) {
      try {
        await lstat(existing)
        break
      } catch {
        existing = dirname(existing)
      }
    }
    const real = await realpath(existing)
    if (!inside(await realpath(this.root), real)) throw new Error(`path ${path} leads outside the workspace directory through a symbolic link`)
    return target
  }

  async #readFile(input: Record<string, unknown>): Promise<ToolOutcome> {
    const path = await this.resolveInside(input.path)
    const content = await readFile(path, 'utf8')
    return { output: cap(content), isError: false }
  }

  async #writeFile(input: Record<string, unknown>): Promise<ToolOutcome> {
    if (typeof input.content !== 'string') throw new Error('content must be a string')
    const path = await this.resolveInside(input.path)
    const existed = await stat(path).then((s) => s.isFile(), () => false)
    await mkdir(dirname(path), { recursive: true })
    await writeFile(path, input.content)
    const rel = relative(this.root, path)
    const size = Buffer.byteLength(input.content)
    await this.#watch.record(rel)
    const over = await this.diskOver()
    return {
      output: `Wrote ${size} bytes to ${rel}.${over ? `\n${diskOverText(over)}` : ''}`,
      isError: over !== null,
      fileChanges: [{ path: rel, action: existed ? 'modified' : 'created', size }],
      ...(over ? { diskOver: over } : {}),
    }
  }

  async #runCommand(input: Record<string, unknown>, signal?: AbortSignal): Promise<ToolOutcome> {
    if (typeof input.command !== 'string' || input.command.trim() === '') throw new Error('command must be a non-empty string')
    const seconds = Math.min(MAX_TIMEOUT_S, Math.max(1, Number(input.timeout_seconds) || DEFAULT_TIMEOUT_S))
    await this.#watch.baseline()
    // Own process group, so a timeout kills what the command started too.
    const child = spawn('/bin/sh', ['-c', input.command], { cwd: this.root, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    let dropped = 0
    const take = (chunk: Buffer): void => {
      const room = OUTPUT_CAP - output.length
      if (room > 0) output += chunk.toString('utf8').slice(0, room)
      dropped += Math.max(0, chunk.length - Math.max(room, 0))
    }
    child.stdout.on('data', take)
    child.stderr.on('data', take)
    let timedOut = false
    const kill = (): void => {
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL')
      } catch {
        /* already gone */
      }
    }
    const timer = setTimeout(() => {
      timedOut = true
      kill()
    }, seconds * 1000)
    signal?.addEventListener('abort', kill, { once: true })
    const [code, sig] = await new Promise<[number | null, NodeJS.Signals | null]>((done, fail) => {
      child.once('error', fail)
      child.once('close', (c, s) => done([c, s]))
    }).finally(() => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', kill)
    })
    const tail = dropped > 0 ? `\n[… ${dropped} more bytes of output cut]` : ''
    const head = timedOut ? `timed out after ${seconds}s` : sig ? `killed by ${sig}` : `exit code ${code}`
    const { changes, manifest } = await this.#watch.changes()
    const quotaBytes = this.#options.diskQuotaBytes
    const over = quotaBytes !== undefined && manifest.bytes > quotaBytes ? { usedBytes: manifest.bytes, quotaBytes } : null
    return {
      output: `${head}\n${output}${tail}${over ? `\n${diskOverText(over)}` : ''}`,
      isError: timedOut || code !== 0 || over !== null,
      ...(changes.length > 0 ? { fileChanges: capChanges(changes) } : {}),
      ...(manifest.truncated ? { scanTruncated: true } : {}),
      ...(over ? { diskOver: over } : {}),
    }
  }
}

function inside(root: string, path: string): boolean {
  const rel = relative(root, path)
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel))
}

export function diskOverText(d: DiskUsage): string {
  const mb = (n: number): string => (n / (1024 * 1024)).toFixed(1)
  return `The workspace directory uses ${mb(d.usedBytes)} MB, over its disk quota of ${mb(d.quotaBytes)} MB.`
}

function cap(text: string): string {
  return text.length <= OUTPUT_CAP ? text : `${text.slice(0, OUTPUT_CAP)}\n[… ${text.length - OUTPUT_CAP} more characters cut]`
}
