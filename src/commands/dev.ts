import { Flags } from '@oclif/core'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { CorralCommand } from '../cli/base-command.js'
import { CliError } from '../cli/errors.js'
import { jsonLine, paint } from '../cli/output.js'
import { configPath, readConfig, writeConfig } from '../cli/profiles.js'
import { explainStartError } from '../cli/start-errors.js'
import { storeFlags } from '../cli/store-flags.js'
import { processGone } from '../proc/index.js'

/** How long SIGTERM's drain may take (as `serve`). */
const DRAIN_TIMEOUT_MS = 20_000
const DEFAULT_PORTS = { api: 7070, proxy: 7071, model: 7072 } as const
export const DEV_PROFILE = 'dev'

const noSandboxBanner = (forced: boolean) => [
  forced ? '!!! --runtime process: corral dev runs agents without a sandbox.' : '!!! bubblewrap cannot sandbox on this machine: corral dev runs agents with --runtime process.',
  '!!! That is NOT a sandbox: each agent is a plain child process with your user, files and network;',
  '!!! only its own HTTPS_PROXY setting sends it through the policy proxy. Fine for this demo agent,',
  '!!! never for untrusted ones. Install bubblewrap (apt-get install bubblewrap) for the real thing.',
].join('\n')

export default class Dev extends CorralCommand<void> {
  static override summary = 'A working demo in one command: serve, a scripted fake model, a demo role, a CLI profile.'
  static override description =
    'Starts `corral serve` on the embedded SQLite store together with a fake model provider on loopback (HTTPS, Anthropic Messages and OpenAI Chat Completions streaming formats, scripted to make the reference agent write a file, run a command and finish). Seeds the default org through /v1, idempotently: provider demo-model, secret demo-model-key, credential demo-model, role demo (a policy that allows only the fake model and meters its output tokens). Saves the CLI profile "dev" (made current) and prints what to try next. Without a usable bubblewrap it uses the process runtime, with a warning: that is not a sandbox. See docs/dev.md.'
  static override examples = ['<%= config.bin %> dev', '<%= config.bin %> dev --port 0 --data-dir /tmp/corral-demo']
  static override flags = {
    ...storeFlags,
    host: Flags.string({ summary: 'Interface to listen on.', env: 'CORRAL_HOST', default: '127.0.0.1' }),
    port: Flags.integer({ summary: 'API port (0 picks free ports for the API, the proxy and the fake model).', env: 'CORRAL_PORT', default: DEFAULT_PORTS.api, min: 0, max: 65535 }),
    'proxy-port': Flags.integer({ summary: `Policy proxy port (default ${DEFAULT_PORTS.proxy}; a free one when --port is 0).`, env: 'CORRAL_PROXY_PORT', min: 0, max: 65535 }),
    'model-port': Flags.integer({ summary: `Fake model port (default ${DEFAULT_PORTS.model}; a free one when --port is 0).`, min: 0, max: 65535 }),
    runtime: Flags.string({ summary: 'Workspace runtime: auto (local when bubblewrap works here, else process), local or process.', env: 'CORRAL_RUNTIME', options: ['auto', 'local', 'process'], default: 'auto' }),
    'allow-unenforced-limits': Flags.boolean({ summary: 'Start even when a configured workspace limit cannot be enforced on this host (as `serve`).', env: 'CORRAL_ALLOW_UNENFORCED_LIMITS', default: false }),
    'log-level': Flags.string({ summary: 'Log level of the server.', env: 'CORRAL_LOG_LEVEL', options: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], default: 'info' }),
  }

  async execute(): Promise<void> {
    const { flags } = await this.parse(Dev)
    const dataDir = resolve(flags['data-dir'])
    const free = flags.port === 0
    const ports = {
      api: flags.port,
      proxy: flags['proxy-port'] ?? (free ? 0 : DEFAULT_PORTS.proxy),
      model: flags['model-port'] ?? (free ? 0 : DEFAULT_PORTS.model),
    }
    const explain = (err: unknown): unknown => explainStartError(err, {
      dataDir, ...(flags.db ? { db: flags.db } : {}),
      ports: new Map([[ports.api, '--port'], [ports.proxy, '--proxy-port'], [ports.model, '--model-port']].filter(([p]) => p !== 0) as Array<[number, string]>),
    }) ?? err
    const release = await lockDataDir(dataDir)
    const cleanups: Array<() => Promise<unknown>> = [release]
    const cleanup = async () => {
      for (const c of cleanups.reverse()) await c().catch(() => {})
    }
    let session: DevSession
    try {
      session = await startSession({ ...flags, json: this.jsonEnabled() }, dataDir, ports, cleanups)
    } catch (err) {
      await cleanup()
      throw explain(err)
    }
    await writeFile(join(dataDir, LOCK_FILE), JSON.stringify({ pid: process.pid, api: session.apiUrl }))
    // The summary says "ready": it is written once SIGTERM is handled, or a stop sent the moment it
    // is read would kill the process before its drain (as `serve`).
    await untilSignal(session, cleanup, () => (this.jsonEnabled() ? jsonLine(session.ready) : process.stdout.write(session.summary)))
  }
}

interface DevSession {
  apiUrl: string
  summary: string
  /** The summary as one JSON object (`--json`). */
  ready: Record<string, unknown>
  logger: import('pino').Logger
}

type DevFlags = { db?: string; host: string; runtime: string; 'allow-unenforced-limits': boolean; 'log-level': string; json: boolean }

/** Fake model, serve, seed, profile — each undone by `cleanups` (in reverse) when a later step fails. */
async function startSession(flags: DevFlags, dataDir: string, ports: { api: number; proxy: number; model: number }, cleanups: Array<() => Promise<unknown>>): Promise<DevSession> {
  // Heavy modules load only here, so `corral --help` stays fast.
  const [{ startServe }, { createLogger }, dev, { CorralClient }] = await Promise.all([
    import('../serve/index.js'), import('../server/index.js'), import('../dev/index.js'), import('../client/index.js'),
  ])
  // Under --json every stdout line is JSON, the log lines included.
  const logger = createLogger({ level: flags['log-level'], ...(flags.json ? { format: 'json' as const } : {}) })
  const runtime = flags.runtime === 'auto' ? await pickRuntime() : flags.runtime
  if (runtime === 'process') process.stderr.write(`${paint('yellow', noSandboxBanner(flags.runtime === 'process'), process.stderr)}\n`)

  const model = await startDevModel(dataDir, flags.host, ports.model, dev)
  cleanups.push(model.close)
  const env = { ...process.env, CORRAL_UPSTREAM_CA: [process.env.CORRAL_UPSTREAM_CA, model.caFile].filter(Boolean).join(',') }
  const running = await startServe({
    dataDir, host: flags.host, port: ports.api, env, logger, proxyPort: ports.proxy,
    runtime, allowUnenforcedLimits: flags['allow-unenforced-limits'],
    ...(flags.db ? { dbUrl: flags.db } : {}),
  })
  cleanups.push(() => running.stop())
  const created = running.bootstrap.adminKey
  if (created && flags.json) jsonLine({ event: 'admin_key_created', org: 'default', key: created.value, path: created.path })
  else if (created) process.stdout.write(`Created org "default" with an owner API key (shown once; also saved to ${created.path}):\n  ${created.value}\n`)

  const keyPath = join(dataDir, 'admin.key')
  const adminKey = running.bootstrap.adminKey?.value ?? (await readFile(keyPath, 'utf8').catch(() => '')).trim()
  if (!adminKey) throw new CliError(`no admin key at ${keyPath}: this store was set up from another data dir; start with a fresh --data-dir, or copy that admin.key here`, 'no_admin_key')
  const client = new CorralClient({ apiUrl: running.url, token: adminKey, userAgent: 'corral-dev' })
  const seeded = await dev.seedDemo(client, model.url).catch((err: unknown) => {
    if (dev.isUnauthorized(err)) throw new CliError(`the admin key in ${keyPath} is not accepted by this store (revoked, or from another store): start with a fresh --data-dir`, 'admin_key_rejected')
    throw err
  })
  for (const change of seeded.changes) logger.info(`dev seed: ${change}`)
  const config = readConfig()
  const previous = config.current
  config.profiles[DEV_PROFILE] = { api_url: client.apiUrl, token: adminKey, org_id: running.bootstrap.org.id }
  config.current = DEV_PROFILE
  writeConfig(config)

  // serve's ready line heads the summary: both are written once SIGTERM is handled and the demo
  // is seeded (a supervisor that waits for `corral ready` and stops at once must get the drain).
  const summary = [
    running.readyLine(),
    '',
    paint('bold', 'corral dev is running'),
    `  console     ${running.url}/   (sign in with the owner key)`,
    `  API         ${running.url}/v1   (owner key in ${keyPath})`,
    `  fake model  ${model.url}   (scripted; Anthropic, OpenAI Chat Completions and Responses, Gemini)`,
    `  runtime     ${runtime === 'local' ? 'local (bubblewrap sandbox)' : 'process (NOT a sandbox; see the warning above)'}`,
    `  CLI profile "${DEV_PROFILE}" saved to ${configPath()} and made current${previous && previous !== DEV_PROFILE ? ` (back: corral profile use ${previous})` : ''}`,
    '',
    'Try, in another terminal (from this checkout: alias corral="$PWD/bin/run.js"):',
    '  corral task submit --role demo "say hello" --wait',
    '  corral task submit --role claude-code "say hello" --wait   (also gemini-cli: the real CLIs)',
    '  corral audit query --filter event_type=policy_decision',
    '  corral audit tail',
    'Ctrl-C stops corral dev.',
    '',
  ].join('\n')
  const ready = {
    event: 'ready', api_url: `${running.url}/v1`, proxy_url: running.proxyUrl, console_url: `${running.url}/`, model_url: model.url,
    runtime, sandboxed: runtime === 'local', profile: DEV_PROFILE, admin_key_path: keyPath, config_path: configPath(),
  }
  return { apiUrl: running.url, summary, ready, logger }
}

/** The fake model over HTTPS with a leaf of its own CA (in the data dir), which the proxy is told to trust. */
async function startDevModel(dataDir: string, host: string, port: number, dev: typeof import('../dev/index.js')) {
  const { loadOrCreateCa, LeafMinter } = await import('../proxy/index.js')
  const caDir = join(dataDir, 'dev-model-ca')
  const ca = await loadOrCreateCa(caDir)
  const caFile = join(caDir, 'ca.pem')
  await writeFile(caFile, ca.certPem)
  const model = await dev.startFakeModel({ script: dev.devScript(), tls: await new LeafMinter(ca).pemFor(host), host, port, apiKey: dev.DEMO.apiKey })
  return { url: model.url, caFile, close: () => model.close() }
}

/** `local` when bubblewrap can sandbox here (the driver's own trial run), else `process`. */
async function pickRuntime(): Promise<'local' | 'process'> {
  const { createRuntime } = await import('../runtime/index.js')
  const scratch = await mkdtemp(join(tmpdir(), 'corral-dev-check-'))
  try {
    const local = await createRuntime('local', { root: scratch, proxy: { host: '127.0.0.1', port: 1 }, warn: () => {}, allowUnenforcedLimits: true, settings: undefined })
    const check = await local.check()
    return check.ok ? 'local' : 'process'
  } finally {
    await rm(scratch, { recursive: true, force: true })
  }
}

const LOCK_FILE = 'dev.lock'

/** One `corral dev` per data dir: a second start says which process has it. Stale locks (dead pid) are taken over. */
async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  const { mkdir } = await import('node:fs/promises')
  await mkdir(dataDir, { recursive: true, mode: 0o700 })
  const path = join(dataDir, LOCK_FILE)
  const held = await readFile(path, 'utf8').then((t) => JSON.parse(t) as { pid?: number; api?: string }, () => undefined)
  if (held?.pid && held.pid !== process.pid && !processGone(held.pid)) {
    throw new CliError(`corral dev is already running on ${dataDir} (pid ${held.pid}${held.api ? `, API ${held.api}/v1` : ''}): use it, stop it first, or pass another --data-dir`, 'already_running')
  }
  await writeFile(path, JSON.stringify({ pid: process.pid }))
  return async () => {
    const now = await readFile(path, 'utf8').then((t) => JSON.parse(t) as { pid?: number }, () => undefined)
    if (now?.pid === process.pid) await rm(path, { force: true })
  }
}

/** As `serve`: SIGTERM/SIGINT drain (bounded), a second signal exits at once with status 1. */
function untilSignal(session: DevSession, cleanup: () => Promise<void>, announce: () => void): Promise<void> {
  const { logger } = session
  process.on('unhandledRejection', (err) => logger.error({ err }, 'BUG: unhandled promise rejection; corral dev keeps running'))
  return new Promise<void>((resolveDone) => {
    let stopping = false
    const shutdown = (signal: string) => {
      if (stopping) {
        logger.error({ signal }, 'second signal during the drain: exiting at once')
        process.exit(1)
      }
      stopping = true
      logger.info({ signal }, 'shutting down: draining requests and flushing the audit log')
      const force = setTimeout(() => {
        logger.error(`shutdown timed out after ${DRAIN_TIMEOUT_MS / 1000}s; exiting`)
        process.exit(1)
      }, DRAIN_TIMEOUT_MS)
      force.unref()
      cleanup().then(() => resolveDone(), (err: unknown) => {
        logger.error({ err }, 'shutdown failed')
        process.exitCode = 1
        resolveDone()
      })
    }
    process.on('SIGTERM', () => shutdown('SIGTERM'))
    process.on('SIGINT', () => shutdown('SIGINT'))
    announce()
  })
}
