import { Flags } from '@oclif/core'
import { CorralCommand } from '../cli/base-command.js'
import { storeFlags } from '../server/store-flags.js'

export default class Proxy extends CorralCommand<void> {
  static override summary = 'Run the outbound policy proxy alone (scale-out), against the same store as `serve`.'
  static override description =
    'Several proxy processes on one Postgres share the capability-token key, secrets, credentials and the audit log. Workspaces trust the CA in the data dir (`corral ca export`); give every process the same CA files.'
  static override examples = ['<%= config.bin %> proxy --db postgres://corral@db/corral --port 7071']
  static override enableJsonFlag = false
  static override flags = {
    ...storeFlags,
    host: Flags.string({ summary: 'Interface to listen on.', env: 'CORRAL_PROXY_HOST', default: '127.0.0.1' }),
    port: Flags.integer({ summary: 'Proxy port (0 picks a free one).', env: 'CORRAL_PROXY_PORT', default: 7071, min: 0, max: 65535 }),
    'upstream-ca': Flags.string({ summary: 'Extra PEM file of roots trusted for upstream TLS (repeatable).', multiple: true, env: 'CORRAL_UPSTREAM_CA' }),
  }

  async execute(): Promise<void> {
    const { flags } = await this.parse(Proxy)
    const [{ resolve }, { openStoreFromFlags }, { openAuditWriter }, { createLogger }, { ProxyService }, { readCaFiles, WORKSPACE_STOPPED_CHANNEL }] = await Promise.all([
      import('node:path'), import('../server/store-flags.js'), import('../audit/index.js'), import('../server/logger.js'),
      import('../proxy/service.js'), import('../proxy/serve-service.js'),
    ])
    const logger = createLogger()
    const store = await openStoreFromFlags(flags)
    const audit = await openAuditWriter(store, { logger, journalDir: resolve(flags['data-dir'], 'audit-journal') })
    const upstreamCaPem = await readCaFiles(flags['upstream-ca']?.join(','))
    const proxy = new ProxyService({
      store, audit, dataDir: resolve(flags['data-dir']), port: flags.port, host: flags.host, env: process.env, logger,
      ...(upstreamCaPem ? { upstreamCaPem } : {}),
    })
    const port = await proxy.start()
    const unlisten = await store.listen(WORKSPACE_STOPPED_CHANNEL, (id) => void proxy.workspaces.deactivate(id))
    process.stdout.write(`corral proxy ready: http://${flags.host}:${port}\n`)
    await new Promise<void>((done) => {
      const shutdown = (): void => {
        const force = setTimeout(() => process.exit(1), 20_000)
        force.unref()
        void (async () => {
          await unlisten()
          await proxy.stop()
          await audit.close()
          await store.close()
        })().then(done, (err: unknown) => {
          logger.error({ err }, 'proxy shutdown failed')
          process.exitCode = 1
          done()
        })
      }
      process.once('SIGTERM', shutdown)
      process.once('SIGINT', shutdown)
    })
  }
}
