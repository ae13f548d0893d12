// Spawns a real `corral serve` (the built binary, bin/run.js → dist/) on a free port with a temp
// data dir, waits for its ready line, and hands back what a test needs to drive it over HTTP or
// through the CLI. Shared by the server, CLI and proxy e2e suites. Run `npm run build` first
// (`npm test` does).
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'

export const CORRAL_BIN = resolve(import.meta.dirname, '../../bin/run.js')

export interface ServeOptions {
  /** Reuse a data dir (e.g. to test a second start); default a fresh temp dir removed on stop. */
  dataDir?: string
  /** Store URL (`postgres://…`); default the SQLite file in the data dir. */
  db?: string
  /** Extra environment (merged over process.env). */
  env?: Record<string, string>
  /** Extra `serve` flags. */
  args?: string[]
  /** How long to wait for the ready line (default 20 s). */
  timeoutMs?: number
}

export interface RunningServe {
  /** Base URL without /v1, e.g. http://127.0.0.1:41234 */
  url: string
  /** The bootstrap owner key from <data-dir>/admin.key ('' when this data dir never bootstrapped a store). */
  adminKey: string
  dataDir: string
  process: ChildProcess
  /** Everything the process wrote so far (stdout and stderr). */
  output(): string
  /** SIGTERM, wait for exit; resolves with the exit code. Removes a temp data dir unless `keepDataDir`. */
  stop(opts?: { keepDataDir?: boolean }): Promise<number | null>
}

/**
 * process.env without the developer's own corral settings: an exported CORRAL_PROXY_PORT=7071
 * (or CORRAL_DB_URL, CORRAL_RUNTIME, …) would make every test serve bind that fixed port or use
 * that store. Only CORRAL_TEST_* (the suite's own switches) passes through; a test sets what it
 * needs in `env`.
 */
export function hermeticEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CORRAL_') || k.startsWith('CORRAL_TEST_')))
}

export async function startServe(opts: ServeOptions = {}): Promise<RunningServe> {
  const ownDir = !opts.dataDir
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'corral-serve-'))
  const args = [CORRAL_BIN, 'serve', '--port', '0', '--data-dir', dataDir, ...(opts.db ? ['--db', opts.db] : []), ...(opts.args ?? [])]
  const child = spawn(process.execPath, args, {
    env: { ...hermeticEnv(), CORRAL_LOG_LEVEL: 'warn', NO_COLOR: '1', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  child.stdout!.on('data', (c) => (out += String(c)))
  child.stderr!.on('data', (c) => (out += String(c)))
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)))

  const url = await new Promise<string>((resolveUrl, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`corral serve did not become ready in ${opts.timeoutMs ?? 20_000} ms:\n${out}`))
    }, opts.timeoutMs ?? 20_000)
    const check = () => {
      const m = /^corral ready: api (http:\/\/\S+?)\/v1\b/m.exec(out)
      if (m) {
        clearTimeout(timer)
        resolveUrl(m[1])
      }
    }
    child.stdout!.on('data', check)
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`corral serve exited with ${code} before it was ready:\n${out}`))
    })
  })

  let stopping: Promise<number | null> | undefined
  return {
    url,
    adminKey: existsSync(join(dataDir, 'admin.key')) ? readFileSync(join(dataDir, 'admin.key'), 'utf8').trim() : '',
    dataDir,
    process: child,
    output: () => out,
    stop(o = {}) {
      stopping ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
        const code = await exited
        if (ownDir && !o.keepDataDir) rmSync(dataDir, { recursive: true, force: true })
        return code
      })()
      return stopping
    },
  }
}

/** Runs the built `corral` binary to completion (admin commands, CLI). */
export function runCorral(args: string[], opts: { env?: Record<string, string>; input?: string } = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolveRun) => {
    const child = spawn(process.execPath, [CORRAL_BIN, ...args], { env: { ...hermeticEnv(), NO_COLOR: '1', ...opts.env }, stdio: ['pipe', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (c) => (stdout += String(c)))
    child.stderr.on('data', (c) => (stderr += String(c)))
    child.stdin.end(opts.input ?? '')
    child.once('close', (code) => resolveRun({ code, stdout, stderr }))
  })
}
