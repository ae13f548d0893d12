// The shared half of every agent kind: takes tasks like the reference agent, runs the kind's CLI
// once per task in its own process group, turns its output into agent events through the kind's
// translator, adds file changes, remembers the CLI's session for the next task, and ends each task
// with a reason a user can act on (docs/agent.md "Agent kinds").
import { spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { DENY_MESSAGES, denyReasonIn, type AgentTask, type TaskOutcome, type TaskStatus } from '../../contract/index.js'
import type { AgentEvent, EventSink } from '../event-sink.js'
import { capChanges, FileWatch } from '../file-watch.js'
import type { TaskSource } from '../task-source.js'
import type { AgentAdapter, CliResult, CliTaskContext } from './types.js'

export interface CliRunnerOptions {
  adapter: AgentAdapter
  /** argv prefix of the CLI (`[path]`, or `[node, path]`). */
  cli: readonly string[]
  workspaceDir: string
  provider: CliTaskContext['provider']
  baseUrl: string
  model: string
  sink: EventSink
  env?: NodeJS.ProcessEnv
  /** SIGTERM to the CLI's process group, then SIGKILL after this long. Default 3 s. */
  killGraceMs?: number
  log?: (line: string) => void
}

/** The CLI's session as saved between tasks, under the kind's state directory. */
interface SavedSession {
  session_id: string
}

/** Lines of the CLI's stderr kept for a failure's reason. */
const STDERR_LINES = 20
/** A longer stdout line is not JSON any CLI would write; it is cut before it reaches a translator. */
const MAX_LINE = 4 * 1024 * 1024

export class CliAgentRunner {
  readonly #o: CliRunnerOptions
  readonly #stateDir: string
  readonly #sessionFile: string
  readonly #watch: FileWatch
  #lastTaskId: string | null = null
  #sessionId: string | null = null

  constructor(options: CliRunnerOptions) {
    this.#o = options
    this.#stateDir = join(options.workspaceDir, '.corral', options.adapter.kind)
    this.#sessionFile = join(options.workspaceDir, '.corral', `${options.adapter.kind}-session.json`)
    // The agents' own state (.corral: sessions, the CLI's home) is not the task's work.
    this.#watch = new FileWatch(options.workspaceDir, { skipTopLevel: ['.corral'] })
  }

  async runSession(source: TaskSource, signal?: AbortSignal): Promise<TaskOutcome[]> {
    const outcomes: TaskOutcome[] = []
    for (let task = await source.next(); task; task = signal?.aborted ? null : await source.next()) {
      outcomes.push(await this.runTask(task, signal))
    }
    if (this.#sessionId && this.#lastTaskId) await this.#emit(this.#lastTaskId, { type: 'session_end', session_id: this.#sessionId, tasks: outcomes.length })
    return outcomes
  }

  // long-function: one task's whole life (session, spawn, stream, outcome) reads best in order.
  async runTask(task: AgentTask, signal?: AbortSignal): Promise<TaskOutcome> {
    const { adapter } = this.#o
    this.#lastTaskId = task.id
    mkdirSync(this.#stateDir, { recursive: true })
    const session = this.#openSession(task)
    const ctx: CliTaskContext = {
      task, cli: this.#o.cli, workspaceDir: this.#o.workspaceDir, stateDir: this.#stateDir, provider: this.#o.provider,
      baseUrl: this.#o.baseUrl, model: this.#o.model, session, env: this.#o.env ?? process.env,
    }
    if (session.fresh) {
      await this.#emit(task.id, {
        type: 'session_start', session_id: session.id, provider: this.#o.provider, model: this.#o.model, resumed: session.resume,
        reset: task.reset_session === true, agent_kind: adapter.kind,
      })
    }
    await this.#emit(task.id, { type: 'task_start', description: task.description, session_id: session.id, agent_kind: adapter.kind, uploads: task.uploads ?? [] })
    const translator = adapter.translator(ctx)
    const end = async (status: TaskStatus, summary: string, reason?: string): Promise<TaskOutcome> => {
      const iterations = translator.iterations()
      const usage = translator.usage()
      const sid = translator.sessionId() ?? session.id
      this.#saveSession(sid)
      await this.#emit(task.id, { type: 'task_end', status, summary, iterations, usage, ...(reason ? { reason } : {}) })
      return { task_id: task.id, status, summary, iterations, usage, ...(reason ? { reason } : {}) }
    }
    if (!adapter.providers.includes(this.#o.provider)) {
      return end('failed', `${adapter.kind} cannot talk to a ${this.#o.provider} provider (it speaks ${adapter.providers.join(', ')}); change the role's provider or agent kind.`, 'agent_error')
    }
    if (signal?.aborted) return end('failed', 'The agent was interrupted.', 'interrupted')

    this.#watch.reset()
    await this.#watch.baseline()
    const inv = adapter.invocation(ctx)
    for (const [path, content] of Object.entries(inv.files ?? {})) {
      mkdirSync(dirname(path), { recursive: true })
      writeFileSync(path, content)
    }
    const child = spawn(inv.argv[0]!, inv.argv.slice(1), {
      cwd: this.#o.workspaceDir, env: inv.env, detached: true, stdio: [inv.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    })
    if (inv.stdin !== undefined) child.stdin!.end(inv.stdin)
    const stderr: string[] = []
    createInterface({ input: child.stderr! }).on('line', (l) => {
      this.#o.log?.(`${adapter.kind}: ${l}`)
      if (l.trim() === '') return
      stderr.push(l.slice(0, 2000))
      if (stderr.length > STDERR_LINES) stderr.shift()
    })
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>((resolve) => {
      child.once('error', (error) => resolve({ code: null, signal: null, error }))
      child.once('close', (code, sig) => resolve({ code, signal: sig }))
    })
    let stopping: NodeJS.Timeout | undefined
    const stop = (): void => {
      killGroup(child.pid, 'SIGTERM')
      stopping = setTimeout(() => killGroup(child.pid, 'SIGKILL'), this.#o.killGraceMs ?? 3000)
    }
    signal?.addEventListener('abort', stop, { once: true })
    try {
      for await (const line of createInterface({ input: child.stdout!, crlfDelay: Infinity })) {
        if (line.trim() === '') continue
        for (const event of translator.line(line.length > MAX_LINE ? line.slice(0, MAX_LINE) : line)) {
          await this.#emit(task.id, event)
          if (event.type === 'tool_result') await this.#fileChanges(task.id, event.iteration)
        }
      }
      const exit = await exited
      // A last scan: what the CLI changed after its last tool result (or without any tool event).
      await this.#fileChanges(task.id, translator.iterations())
      if (signal?.aborted) return await end('failed', 'The agent was interrupted.', 'interrupted')
      return await end(...outcome(adapter.kind, exit, translator.result(), stderr))
    } catch (err) {
      killGroup(child.pid, 'SIGKILL')
      if (signal?.aborted) return await end('failed', 'The agent was interrupted.', 'interrupted')
      return await end('failed', `${adapter.kind} adapter: ${(err as Error).message}`, 'agent_error')
    } finally {
      signal?.removeEventListener('abort', stop)
      if (stopping) clearTimeout(stopping)
      // Whatever the CLI left running (a background job) ends with its task.
      killGroup(child.pid, 'SIGKILL')
    }
  }

  /** The session this task runs in: the saved one (resumed), or a new one on the first task and after reset_session. */
  #openSession(task: AgentTask): CliTaskContext['session'] & { fresh: boolean } {
    if (task.reset_session) rmSync(this.#sessionFile, { force: true })
    const known = this.#sessionId
    if (known && !task.reset_session) return { id: known, resume: true, fresh: false }
    let saved: SavedSession | undefined
    try {
      saved = JSON.parse(readFileSync(this.#sessionFile, 'utf8')) as SavedSession
    } catch {
      saved = undefined
    }
    const id = saved?.session_id ?? randomUUID()
    this.#sessionId = id
    return { id, resume: saved !== undefined, fresh: true }
  }

  #saveSession(id: string): void {
    this.#sessionId = id
    writeFileSync(this.#sessionFile, `${JSON.stringify({ session_id: id } satisfies SavedSession)}\n`)
  }

  async #fileChanges(taskId: string, iteration: unknown): Promise<void> {
    const { changes } = await this.#watch.changes()
    for (const change of capChanges(changes)) await this.#emit(taskId, { type: 'file_change', ...(typeof iteration === 'number' ? { iteration } : {}), ...change })
  }

  #emit(taskId: string, event: AgentEvent): Promise<void> {
    return this.#o.sink.emit(taskId, event)
  }
}

/**
 * How the task ended, from the CLI's exit and what it reported. A model call the proxy denied is
 * named as such (the proxy's 403 body carries `"code":"policy_denied"` and the reason), wherever
 * the CLI printed it; any other failure gives the exit code and the CLI's last error line.
 */
export function outcome(kind: string, exit: { code: number | null; signal: NodeJS.Signals | null; error?: Error }, result: CliResult | undefined, stderr: readonly string[]): [status: TaskStatus, summary: string, reason?: string] {
  if (exit.error) return ['failed', `${kind} could not be started: ${exit.error.message}`, 'agent_error']
  const failedResult = result?.status === 'failed'
  if (exit.code === 0 && result && !failedResult) return ['completed', result.summary]
  const texts = [result?.error ?? '', result?.summary ?? '', ...[...stderr].reverse()]
  const deny = texts.map(policyDeny).find((d) => d !== undefined)
  if (deny) return ['failed', `The model call was denied by the proxy (${deny.reason})${deny.message ? `: ${deny.message}` : ''}`, 'policy_denied']
  const how = exit.code !== null ? `exited with code ${exit.code}` : exit.signal ? `was killed by ${exit.signal}` : 'ended'
  const last = result?.error || (failedResult ? result.summary : '') || stderr.at(-1) || (exit.code === 0 ? 'it reported no result' : 'no error output')
  return ['failed', `${kind} ${how}: ${last}`.slice(0, 2000), failedResult && result?.error && /api|model|status|overloaded|rate/i.test(result.error) ? 'model_error' : 'agent_error']
}

/**
 * The proxy's deny, when `text` carries it: its JSON body (`"code":"policy_denied"`), or — as most
 * CLIs print only the body's `error.message` — one of the proxy's deny messages (DENY_MESSAGES).
 */
export function policyDeny(text: string): { reason: string; message?: string } | undefined {
  const known = denyReasonIn(text)
  if (known) return { reason: known, message: DENY_MESSAGES[known] }
  if (!text.includes('policy_denied')) return undefined
  const reason = /"reason"\s*:\s*"([a-z_]+)"/.exec(text)?.[1]
  return { reason: reason ?? 'denied' }
}

function killGroup(pid: number | undefined, sig: NodeJS.Signals): void {
  if (pid === undefined) return
  try {
    process.kill(-pid, sig)
  } catch {
    // Already gone.
  }
}
