import { Flags } from '@oclif/core'
import { CorralCommand } from '../cli/base-command.js'
import { jsonLine } from '../cli/output.js'
import { storeFlags } from '../cli/store-flags.js'

export default class Proxy extends CorralCommand<void> {
  static override summary = 'Run the outbound policy proxy alone (scale-out), against the same store as `serve`.'
  static override description =
    'Several proxy processes on one Postgres share the capability-token key, secrets, credentials and the audit log. Workspaces trust the CA in the data dir (`corral ca export`); give every process the same CA files. `--workers N` runs N processes on this port, each a complete proxy with its own audit journal; a worker that dies is replaced (docs/proxy.md "Worker processes").'
  static override examples = ['<%= config.bin %> proxy --db postgres://corral@db/corral --port 7071']
  static override flags = {
    ...storeFlags,
    host: Flags.string({ summary: 'Interface to listen on.', env: 'CORRAL_PROXY_HOST', default: '127.0.0.1' }),
    port: Flags.integer({ summary: 'Proxy port (0 picks a free one).', env: 'CORRAL_PROXY_PORT', default: 7071, min: 0, max: 65535 }),
    'upstream-ca': Flags.string({ summary: 'Extra PEM file of roots trusted for upstream TLS (repeatable).', multiple: true, env: 'CORRAL_UPSTREAM_CA' }),
    workers: Flags.integer({
      summary: 'Proxy processes sharing the port (default 1: the proxy runs in this process; more only where the proxy has cores of its own).',
      env: 'CORRAL_PROXY_WORKERS', min: 1, max: 256,
    }),
  }

  async execute(): Promise<void> {
    const { flags } = await this.parse(Proxy)
    // Heavy modules load only here, so `corral --help` stays fast; and only the proxy's: not serve's
    // face, which would load the API server, the runtime and the workspaces into a proxy process.
    const [{ startProxyAlone }, { announceProxyWorker, defaultProxyWorkers, isProxyWorker, releaseProxyWorker, startProxyWorkers }, { createLogger }] = await Promise.all([
      import('../serve/proxy-alone.js'), import('../serve/proxy-workers.js'), import('../server/logger.js'),
    ])
    const options = {
      dataDir: flags['data-dir'], host: flags.host, port: flags.port, logger: createLogger(),
      ...(flags.db !== undefined ? { dbUrl: flags.db } : {}),
      // Repeatable, and CORRAL_UPSTREAM_CA is a comma-separated list.
      upstreamCaFiles: (flags['upstream-ca'] ?? []).flatMap((v) => v.split(',')).map((f) => f.trim()).filter(Boolean),
    }
    const worker = isProxyWorker()
    const workers = flags.workers ?? defaultProxyWorkers()
    try {
      // A worker is forked with the primary's arguments: `workers` is the size of its pool.
      const running = worker || workers === 1 ? await startProxyAlone({ ...options, workers }) : await startProxyWorkers({ ...options, workers })
      await untilSignalled(running, () => {
        // A worker reports to its primary, which prints the one ready line.
        if (worker) announceProxyWorker(running.url, running.replicaId)
        else if (this.jsonEnabled()) jsonLine({ event: 'ready', proxy_url: running.url, workers })
        else process.stdout.write(`corral proxy ready: ${running.url}${workers > 1 ? ` (${workers} workers)` : ''}\n`)
      })
    } finally {
      // The IPC channel to the primary keeps a worker alive: let go once done, started or not.
      if (worker) releaseProxyWorker()
    }
  }
}

/** Announces, then waits for SIGTERM/SIGINT and stops (a second signal kills: the handlers run once). */
function untilSignalled(running: { stop(): Promise<void>; logger: { error(obj: object, msg: string): void } }, announce: () => void): Promise<void> {
  return new Promise<void>((done) => {
    let stopping = false
    const shutdown = (): void => {
      if (stopping) return
      stopping = true
      const force = setTimeout(() => process.exit(1), 30_000)
      force.unref()
      running.stop().then(done, (err: unknown) => {
        running.logger.error({ err }, 'proxy shutdown failed')
        process.exitCode = 1
        done()
      })
    }
    process.once('SIGTERM', shutdown)
    process.once('SIGINT', shutdown)
    announce()
  })
}
