// The real `corral serve` for tests: the built binary (bin/run.js → dist/), so run `npm run build`
// first (`npm test` does). `startStack()` is where an e2e suite starts — serve on free ports with a
// temp data dir, an optional fake model provider, a provider and a role, the admin's API and CLI
// clients, one close(). `startServe()` is the bare process, for suites about serve itself (start-up,
// flags, shutdown, restarts, replicas, chaos); `runCorral()` runs any other command to completion.
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import pg from 'pg'
import { LeafMinter, loadOrCreateCa } from '../../src/proxy/ca.js'
import { startFakeAnthropic, type FakeProvider, type Script } from '../agent/fake-model.js'
import { startFakeModel, type WireFormat } from '../../src/dev/index.js'
import { onLoopback, portOf } from './loopback-caps.js'
import { unmountUnder } from './mounts.js'

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
        if (ownDir && !o.keepDataDir) {
          unmountUnder(dataDir)
          rmSync(dataDir, { recursive: true, force: true })
        }
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

// The e2e stack (startStack): what an e2e suite needs around one serve, and one close() for it.

export interface StackOptions extends Omit<ServeOptions, 'db'> {
  /** `--runtime` (local is bubblewrap; suites pick local where `bwrapAvailable()`, else process). */
  runtime?: 'local' | 'process'
  /**
   * Store: the SQLite file in the data dir (default), a `postgres://…` URL used as is, or
   * `{ postgres: baseUrl }` — a fresh database on that server (e.g. CORRAL_TEST_PG_URL), dropped on close.
   */
  db?: string | { postgres: string }
  /** A fake Anthropic API (test/agent/fake-model.ts) on HTTPS loopback answering with this script. */
  model?: Script
  /** The APIs that fake model speaks (default Anthropic Messages only). */
  modelApis?: readonly WireFormat[]
  /**
   * Also make a test CA whose certificates serve trusts as upstreams (CORRAL_UPSTREAM_CA), for a
   * suite's own HTTPS upstream (`stack.upstreamTls`). Implied by `model`.
   */
  upstreamCa?: boolean
  /**
   * The provider to create (POST /v1/providers). Defaults: name `fake-anthropic`, the fake model's
   * URL and model `claude-test` when there is a model; otherwise a dead address. A `base_url` that
   * is a path (`/v1`) is on the fake model. Omit it and `role` to create none.
   */
  provider?: Partial<ProviderBody>
  /**
   * A role on that provider (POST /v1/agent-roles). With a fake model, `"127.0.0.1"` and
   * `"localhost"` in the capabilities' domain lists are opened to the model's port (onLoopback).
   */
  role?: { name: string; capabilities?: string } & Record<string, unknown>
}

interface ProviderBody {
  name: string
  kind: string
  base_url: string
  default_model: string
}

export interface ApiAnswer {
  status: number
  body: any // tests read fields freely
}

export interface Stack {
  serve: RunningServe
  /** A temp dir for the suite's files (also XDG_CONFIG_HOME of `corral()`), removed on close. */
  dir: string
  /** The proxy's address from the ready line, e.g. http://127.0.0.1:41235 */
  proxyUrl: string
  model?: FakeProvider
  /** The created provider and role as the API returned them. */
  provider?: { id: string; name: string }
  role?: { id: string; name: string }
  /** A leaf certificate for `host` signed by the upstream test CA (needs `upstreamCa` or `model`). */
  upstreamTls(host: string): Promise<{ key: string; cert: string }>
  /** Environment for the CLI as the admin: CORRAL_API_URL, CORRAL_TOKEN, XDG_CONFIG_HOME. */
  cliEnv: Record<string, string>
  /** `/v1${path}` as the admin; the body parsed as JSON. */
  api(method: string, path: string, body?: unknown): Promise<ApiAnswer>
  /** The built `corral` binary as the admin. */
  corral(args: string[], opts?: { input?: string }): ReturnType<typeof runCorral>
  /** Polls `probe` every 100 ms until it returns something truthy; fails after `ms` with serve's output. */
  until<T>(probe: () => Promise<T | undefined | false>, what: string, ms?: number): Promise<T>
  /** A task once it is completed, failed or cancelled. */
  taskDone(id: string): Promise<any>
  /** A workspace's audit events, oldest first, with `filter=` terms. */
  audit(workspaceId: string, ...filters: string[]): Promise<any[]>
  /** Stops serve and the model, drops a created database, removes the temp dirs. Idempotent. */
  close(): Promise<void>
}

export async function startStack(opts: StackOptions = {}): Promise<Stack> {
  const dir = mkdtempSync(join(tmpdir(), 'corral-e2e-'))
  const cleanups: Array<() => Promise<unknown>> = [async () => {
    unmountUnder(dir)
    rmSync(dir, { recursive: true, force: true })
  }]
  const close = once(async () => {
    for (const c of cleanups.reverse()) await c()
  })
  try {
    return await build(opts, dir, cleanups, close)
  } catch (err) {
    await close()
    throw err
  }
}

async function build(opts: StackOptions, dir: string, cleanups: Array<() => Promise<unknown>>, close: () => Promise<void>): Promise<Stack> {
  const { runtime, db, model: script, modelApis, upstreamCa, provider: providerOpts, role: roleOpts, ...serveOpts } = opts
  const env: Record<string, string> = { ...serveOpts.env }
  let minter: LeafMinter | undefined
  if (upstreamCa || script) {
    const ca = await loadOrCreateCa(join(dir, 'upstream-ca'))
    writeFileSync(join(dir, 'upstream-ca.pem'), ca.certPem)
    env.CORRAL_UPSTREAM_CA = join(dir, 'upstream-ca.pem')
    minter = new LeafMinter(ca)
  }
  const tls = script ? await minter!.pemFor('127.0.0.1') : undefined
  const model = script ? await (modelApis ? startFakeModel({ script, formats: modelApis, record: true, tls: tls! }) : startFakeAnthropic(script, tls)) : undefined
  if (model) cleanups.push(() => model.close())
  let dbUrl = typeof db === 'string' ? db : undefined
  if (db && typeof db === 'object') {
    const created = await createTestDatabase(db.postgres)
    cleanups.push(() => created.drop())
    dbUrl = created.url
  }
  const serve = await startServe({
    ...serveOpts, env, ...(dbUrl ? { db: dbUrl } : {}),
    args: [...(runtime ? ['--runtime', runtime] : []), ...(serveOpts.args ?? [])],
  })
  cleanups.push(() => serve.stop())
  const proxyUrl = /proxy (http:\/\/[^\s,)]+)/.exec(serve.output())?.[1] ?? ''

  const api = async (method: string, path: string, body?: unknown): Promise<ApiAnswer> => {
    const res = await fetch(`${serve.url}/v1${path}`, {
      method, headers: { authorization: `Bearer ${serve.adminKey}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    })
    return { status: res.status, body: await res.json() }
  }
  const until = async <T>(probe: () => Promise<T | undefined | false>, what: string, ms = 30_000): Promise<T> => {
    const end = Date.now() + ms
    for (;;) {
      const v = await probe()
      if (v) return v
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}\n${serve.output().slice(-3000)}`)
      await new Promise((r) => setTimeout(r, 100))
    }
  }
  const { provider, role } = await createProviderAndRole(api, model, providerOpts, roleOpts)

  const cliEnv = { CORRAL_API_URL: serve.url, CORRAL_TOKEN: serve.adminKey, XDG_CONFIG_HOME: dir }
  return {
    serve, dir, proxyUrl, model, provider, role, cliEnv, api, until, close,
    upstreamTls: (host) => {
      if (!minter) throw new Error('startStack: upstreamTls needs { upstreamCa: true } or a model')
      return minter.pemFor(host)
    },
    corral: (args, o = {}) => runCorral(args, { env: cliEnv, ...(o.input !== undefined ? { input: o.input } : {}) }),
    taskDone: (id) => until(async () => {
      const t = (await api('GET', `/tasks/${id}`)).body
      return ['completed', 'failed', 'cancelled'].includes(t.status) && t
    }, `task ${id}`),
    audit: async (wsId, ...filters) =>
      (await api('GET', `/workspaces/${wsId}/audit?order=asc&limit=1000${filters.map((f) => `&filter=${encodeURIComponent(f)}`).join('')}`)).body.events,
  }
}

/** The stack's provider (and role on it) through the API; a refusal fails the start with its body. */
async function createProviderAndRole(api: Stack['api'], model: FakeProvider | undefined, providerOpts: StackOptions['provider'], roleOpts: StackOptions['role']): Promise<Pick<Stack, 'provider' | 'role'>> {
  const created = async (what: string, path: string, body: unknown) => {
    const res = await api('POST', path, body)
    if (res.status !== 201) throw new Error(`creating the ${what} answered ${res.status}: ${JSON.stringify(res.body)}`)
    return res.body as { id: string; name: string }
  }
  if (!providerOpts && !roleOpts) return {}
  const defaults = model
    ? { name: 'fake-anthropic', kind: 'anthropic', base_url: model.url, default_model: 'claude-test' }
    : { name: 'none', kind: 'anthropic', base_url: 'https://127.0.0.1:9', default_model: 'none' }
  const baseUrl = providerOpts?.base_url?.startsWith('/') && model ? `${model.url}${providerOpts.base_url}` : providerOpts?.base_url
  const provider = await created('provider', '/providers', { ...defaults, ...providerOpts, ...(baseUrl ? { base_url: baseUrl } : {}) })
  if (!roleOpts) return { provider }
  const caps = roleOpts.capabilities
  const capabilities = caps !== undefined && model ? onLoopback(caps, portOf(model.url)) : caps
  const role = await created('role', '/agent-roles', { ...roleOpts, ...(capabilities !== undefined ? { capabilities } : {}), provider_id: provider.id })
  return { provider, role }
}

/**
 * A fresh database on the Postgres server of `baseUrl` (for serve replicas sharing one database,
 * or a stack's `db: { postgres }`); drop() removes it, closing what still holds it.
 */
export async function createTestDatabase(baseUrl: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `corral_e2e_${randomBytes(4).toString('hex')}`
  const url = new URL(baseUrl)
  url.pathname = `/${name}`
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: baseUrl })
    await client.connect()
    try {
      await client.query(sql)
    } finally {
      await client.end()
    }
  }
  await admin(`CREATE DATABASE ${name}`)
  return { url: url.toString(), drop: once(() => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)) }
}

function once(fn: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined
  return () => (running ??= fn())
}
