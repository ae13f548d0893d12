import { Flags } from '@oclif/core'
import { resolve } from 'node:path'
import { CorralCommand } from '../cli/base-command.js'
import { jsonLine } from '../cli/output.js'
import { explainStartError } from '../cli/start-errors.js'
import { storeFlags } from '../cli/store-flags.js'
import { RUNTIME_KINDS, runtimeKindsHelp } from '../runtime/index.js'

/** How long SIGTERM's drain (requests, streams, proxied requests, audit flush) may take. */
export const DRAIN_TIMEOUT_MS = 20_000
/** Exit code when the drain was cut short (timeout or a second signal). */
export const EXIT_FORCED = 1

export default class Serve extends CorralCommand<void> {
  static override summary = 'Run the control plane: the /v1 API (and every other service) on one store.'
  static override description =
    'On first start with an empty store, creates org `default`, an owner user and an owner API key; the key is printed once and written to <data-dir>/admin.key (mode 0600). SIGTERM first answers /readyz with 503 (for CORRAL_DRAIN_DELAY_MS, default 0, while still serving), then drains in-flight requests and streams (at most 20 s), flushes the audit log and exits 0; a second SIGTERM (or SIGINT) exits at once with status 1. Every answered request\'s audit row is in the local journal before its answer leaves: CORRAL_AUDIT_DURABILITY=process (default) survives a crash of serve, =host also a crash of the machine at the cost of a disk flush per answer (docs/reliability.md "Journal durability").'
  static override examples = ['<%= config.bin %> serve', '<%= config.bin %> serve --port 8080 --db postgres://corral@db/corral']
  static override flags = {
    ...storeFlags,
    host: Flags.string({ summary: 'Interface to listen on.', env: 'CORRAL_HOST', default: '127.0.0.1' }),
    port: Flags.integer({ summary: 'API port (0 picks a free one).', env: 'CORRAL_PORT', default: 7070, min: 0, max: 65535 }),
    // No oclif default: unset means the proxy service decides (7071, or a free port when --port is 0).
    'proxy-port': Flags.integer({ summary: 'Outbound policy proxy port (default 7071; a free one when --port is 0).', env: 'CORRAL_PROXY_PORT', min: 0, max: 65535 }),
    'allow-unenforced-limits': Flags.boolean({ summary: 'Start even when a configured workspace limit cannot be enforced on this host (it is logged as a warning instead of refusing to start).', env: 'CORRAL_ALLOW_UNENFORCED_LIMITS', default: false }),
    'lease-ttl': Flags.string({ summary: 'Seconds a replica\'s workspace leases outlive its last heartbeat (PostgreSQL replicas; 0.5 to 300, default 15): another replica takes a dead one\'s workspaces over after this.', env: 'CORRAL_LEASE_TTL' }),
    runtime: Flags.string({ summary: `Workspace runtime: ${runtimeKindsHelp()}.`, env: 'CORRAL_RUNTIME', options: [...RUNTIME_KINDS], default: 'local' }),
    'public-url': Flags.string({ summary: 'Base URL browsers reach this server at (https://corral.example.com); OAuth consent redirects to <public-url>/v1/oauth/callback. Unset: OAuth consent is refused (oauth_unavailable).', env: 'CORRAL_PUBLIC_URL' }),
    // Human-readable lines on a terminal, JSON otherwise (CORRAL_LOG_FORMAT=json|pretty overrides).
    'log-level': Flags.string({ summary: 'Log level.', env: 'CORRAL_LOG_LEVEL', options: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], default: 'info' }),
  }

  async execute(): Promise<void> {
    const { flags } = await this.parse(Serve)
    // Heavy modules (fastify, kysely, drivers) load only here, so `corral --help` stays fast.
    const [{ startServe }, { createLogger }] = await Promise.all([import('../serve/index.js'), import('../server/index.js')])
    const running = await startServe({
      dataDir: flags['data-dir'], host: flags.host, port: flags.port, runtime: flags.runtime,
      allowUnenforcedLimits: flags['allow-unenforced-limits'], logger: createLogger({ level: flags['log-level'], ...(this.jsonEnabled() ? { format: 'json' as const } : {}) }),
      ...(flags.db !== undefined ? { dbUrl: flags.db } : {}),
      ...(flags['proxy-port'] !== undefined ? { proxyPort: flags['proxy-port'] } : {}),
      ...(flags['lease-ttl'] !== undefined ? { leaseTtl: flags['lease-ttl'] } : {}),
      ...(flags['public-url'] !== undefined ? { publicUrl: flags['public-url'] } : {}),
    }).catch((err: unknown) => {
      // A held port or a database that cannot be reached: one line saying which flag to change.
      const proxyPort = flags['proxy-port'] ?? (flags.port === 0 ? 0 : 7071)
      const ports = new Map<number, string>([[proxyPort, '--proxy-port'], [flags.port, '--port']].filter(([p]) => p !== 0) as Array<[number, string]>)
      throw explainStartError(err, { ports, dataDir: resolve(flags['data-dir']), ...(flags.db ? { db: flags.db } : {}) }) ?? err
    })
    const key = running.bootstrap.adminKey
    if (key && this.jsonEnabled()) jsonLine({ event: 'admin_key_created', org: 'default', key: key.value, path: key.path })
    else if (key) process.stdout.write(`Created org "default" with an owner API key (shown once; also saved to ${key.path}):\n  ${key.value}\n`)

    // Last line of defence: a promise rejected with nobody listening is a bug, logged loudly, but
    // it must not take down every workspace, stream and proxied request with it.
    process.on('unhandledRejection', (err) => running.logger.error({ err }, 'BUG: unhandled promise rejection; serve keeps running'))

    await new Promise<void>((resolve) => {
      let stopping = false
      const shutdown = (signal: string) => {
        if (stopping) {
          // The operator insists: stop now. Events already acknowledged are in the journal.
          running.logger.error({ signal }, 'second signal during the drain: exiting at once')
          process.exit(EXIT_FORCED)
        }
        stopping = true
        // Not ready from now on; with CORRAL_DRAIN_DELAY_MS everything else is still served that
        // long, so a Service stops routing here before the listeners close (docs/kubernetes.md).
        running.drain()
        const delay = running.config.drainDelayMs
        running.logger.info({ signal, drainDelayMs: delay }, 'shutting down: draining requests and flushing the audit log')
        // A drain that hangs (a stuck upstream) must not keep the process alive forever.
        const force = setTimeout(() => {
          running.logger.error(`shutdown timed out after ${(delay + DRAIN_TIMEOUT_MS) / 1000}s; exiting`)
          process.exit(EXIT_FORCED)
        }, delay + DRAIN_TIMEOUT_MS)
        force.unref()
        new Promise((r) => setTimeout(r, delay)).then(() => running.stop()).then(
          () => resolve(),
          (err: unknown) => {
            running.logger.error({ err }, 'shutdown failed')
            process.exitCode = 1
            resolve()
          },
        )
      }
      process.on('SIGTERM', () => shutdown('SIGTERM'))
      process.on('SIGINT', () => shutdown('SIGINT'))
      // "ready" only once SIGTERM is handled: a stop sent the moment the line is read (a test, a
      // supervisor) would otherwise kill the process by the signal's default, without its drain.
      if (this.jsonEnabled()) jsonLine({ event: 'ready', api_url: `${running.url}/v1`, proxy_url: running.proxyUrl })
      else process.stdout.write(`${running.readyLine()}\n`)
      // This replica may no longer serve (its start-up lock went to a conflicting replica): drain, stop, exit 1.
      running.onFatal(() => {
        process.exitCode = 1
        shutdown('fatal')
      })
    })
  }
}
