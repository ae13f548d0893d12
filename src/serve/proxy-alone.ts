// `corral proxy`: the outbound proxy without the API or workspaces (scale-out), on the same store
// as `serve`. Built in serve's order with the parts the proxy needs: config → store → replica row
// (PostgreSQL) → audit writer → material keys → proxy; torn down in reverse. On PostgreSQL the
// process is a replica of kind `proxy` (src/serve/replica.ts: a row and a heartbeat, no workspaces,
// no start-up lock) and takes `max_concurrent` permits from the same database table as every serve,
// so a ceiling holds across serve and `corral proxy` processes together (docs/proxy.md "Budgets").
// On SQLite `max_concurrent` is per process (one serve, or `corral proxy` processes each counting
// their own requests). The heartbeat's TTL is CORRAL_LEASE_TTL (default 15 s).
import { join, resolve } from 'node:path'
import type { Logger } from 'pino'
import { journalSettingsFromEnv, openAuditWriter } from '../audit/index.js'
import { loadOrCreateCa } from '../proxy/index.js'
import { trimHeapWhenIdle } from '../proc/index.js'
import { CapabilityTokens, Sealer, loadMasterKey, loadTokenKey } from '../secrets/index.js'
import { defaultStoreUrl, openStore } from '../store/index.js'
import { checkMasterKey } from './master-key.js'
import { permitSource, startProxy } from './proxy.js'
import { leaseTtlMs, startReplica } from './replica.js'
import { Teardown } from './teardown.js'

export interface ProxyAloneOptions {
  dataDir: string
  dbUrl?: string
  host: string
  port: number
  upstreamCaFiles: readonly string[]
  env?: NodeJS.ProcessEnv
  /** The command's logger (src/server/logger.ts): passed in, so this module loads none of the API server. */
  logger: Logger
  /** How many worker processes this one is one of (`--workers N`, src/serve/proxy-workers.ts); 1 when alone. */
  workers?: number
}

/** The audit writer's own linger before a small database batch (src/audit/writer.ts). */
const AUDIT_DB_LINGER_MS = 10

export interface RunningProxyAlone {
  readonly logger: Logger
  /** `http://host:port`. */
  readonly url: string
  /** Its replica row's id where it takes `max_concurrent` permits from the database (PostgreSQL). */
  readonly replicaId?: string
  stop(): Promise<void>
}

export async function startProxyAlone(options: ProxyAloneOptions): Promise<RunningProxyAlone> {
  const env = options.env ?? process.env
  const dataDir = resolve(options.dataDir)
  const logger = options.logger
  const teardown = new Teardown(logger)
  try {
    const sealer = new Sealer(await loadMasterKey(dataDir, env))
    const store = await openStore(options.dbUrl ?? defaultStoreUrl(dataDir))
    teardown.add('store', () => store.close(), { mustSucceed: true })
    await checkMasterKey(store, sealer)
    const replica = await startReplica({ store, logger, dataDir, ttlMs: leaseTtlMs(env.CORRAL_LEASE_TTL), sharedStores: false, proxyOnly: true })
    teardown.add('replica', () => replica.stop())
    // N workers each lingering as one process would make N times the commits of one process for the
    // same rows, each writing the same index pages again and, on SQLite, taking the one write lock
    // and invalidating the other workers' page caches: a worker lingers N times as long, so the pool
    // commits as often as one process. Rows are durable in the journal before their answer either
    // way; only their arrival in the database waits.
    const pool = Math.max(1, options.workers ?? 1)
    const audit = await openAuditWriter(store, {
      logger, journalDir: join(dataDir, 'audit-journal'), ...journalSettingsFromEnv(env),
      ...(pool > 1 ? { dbLingerMs: AUDIT_DB_LINGER_MS * pool } : {}),
    })
    teardown.add('audit', () => audit.close(), { mustSucceed: true })
    const ca = await loadOrCreateCa(dataDir)
    const tokens = new CapabilityTokens(await loadTokenKey(store.settings))
    const proxy = await startProxy({
      store, audit, logger, sealer, ca, tokens, dataDir, host: options.host, port: options.port, env, upstreamCaFiles: options.upstreamCaFiles,
      ...(replica.leases ? { permits: permitSource(store, replica) } : {}),
    })
    teardown.add('proxy', () => proxy.stop())
    await replica.listening({ proxyUrl: proxy.url })
    teardown.add('idle heap', trimHeapWhenIdle())
    return { logger, url: proxy.url, ...(replica.leases ? { replicaId: replica.id } : {}), stop: () => teardown.run() }
  } catch (err) {
    await teardown.run().catch(() => {})
    throw err
  }
}
