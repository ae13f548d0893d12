// `corral serve`, built explicitly and in order, each part from the ones before it:
//   config → material keys (sealer) → store → audit writer + bus → bootstrap → CA + capability
//   tokens → proxy (listening) → pack content → runtime driver → workspace controller → HTTP API (listening)
// and torn down in reverse (teardown.ts): the API drains its requests, the controller stops its
// loops, the driver, the proxy drains proxied requests, the audit log flushes, the store closes.
// This is the only module that knows every part; docs/design.md "serve" walks it.
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import type { Logger } from 'pino'
import { LogSigner, ProvableLog, WitnessDir, createAuditBus, openAuditWriter, type AuditWriter } from '../audit/index.js'
import type { AgentCallbackHandler } from '../contract/index.js'
import { AddressGuard } from '../net/index.js'
import { trimHeapWhenIdle } from '../proc/index.js'
import { caFingerprint, loadOrCreateCa, type Endpoint } from '../proxy/index.js'
import { CapabilityTokens, OAuthHttp, Sealer, loadMasterKey, loadTokenKey } from '../secrets/index.js'
import {
  BuiltinIdentityProvider, Identity, OidcIdentityProvider, bootstrap, createLogger, serverConfigFromEnv,
  type BootstrapResult, type ServerDeps,
} from '../server/index.js'
import { openStore, type Store } from '../store/index.js'
import { startApi } from './api.js'
import { startAuditSinks } from './audit-sinks.js'
import { serveConfig, type ServeConfig, type ServeOptions } from './config.js'
import { lockDataDir } from './data-dir-lock.js'
import { checkMasterKey } from './master-key.js'
import { openPackContent } from './packs.js'
import { databaseEndpoint, endpointOf, permitSource, readCaFiles, startProxy } from './proxy.js'
import { startReplica } from './replica.js'
import { Teardown } from './teardown.js'
import { buildWorkspaces, openRuntime } from './workspaces.js'

export interface RunningServe {
  readonly config: ServeConfig
  readonly logger: Logger
  readonly bootstrap: BootstrapResult
  /** API base URL (without /v1). */
  readonly url: string
  /** The outbound proxy, `http://host:port`. */
  readonly proxyUrl: string
  readyLine(): string
  /** From now on /readyz answers 503 (SIGTERM's first step); everything else is still served until stop(). */
  drain(): void
  /** Stops every part in reverse order; rejects when the audit log or the store did not close cleanly. */
  stop(): Promise<void>
  /**
   * `cb` is called (once, with a one-line reason already logged) when this process must stop
   * serving: the replicas' start-up lock was lost and another replica took it (replica.ts).
   */
  onFatal(cb: (reason: string) => void): void
}

export async function startServe(options: ServeOptions & { logger?: Logger }): Promise<RunningServe> {
  const config = serveConfig(options)
  await mkdir(config.dataDir, { recursive: true, mode: 0o700 })
  const logger = options.logger ?? createLogger()
  const teardown = new Teardown(logger)
  // Before anything in the data dir is opened: a second serve on it stops here (data-dir-lock.ts).
  teardown.add('data dir lock', await lockDataDir(config.dataDir))
  // Set by drain() (SIGTERM's first step): /readyz answers 503 from then on.
  const drain = { on: false }
  try {
    const running = await build(config, logger, teardown, drain)
    teardown.add('idle heap', trimHeapWhenIdle())
    return { ...running, drain: () => void (drain.on = true) }
  } catch (err) {
    await teardown.run().catch(() => {})
    throw err
  }
}

async function build(config: ServeConfig, logger: Logger, teardown: Teardown, drain: { on: boolean }): Promise<Omit<RunningServe, 'drain'>> {
  // One master key for the routes that seal and the proxy that opens (src/secrets/); a bad
  // CORRAL_MASTER_KEY refuses the start before anything is opened.
  const sealer = new Sealer(await loadMasterKey(config.dataDir, config.env))
  const store = await openStore(config.dbUrl)
  teardown.add('store', () => store.close(), { mustSucceed: true })
  // Replicas share sealed material: a key that cannot open it refuses the start (master-key.ts).
  await checkMasterKey(store, sealer)
  // This process as a replica (replica.ts: id, heartbeat, leases; deregistered after every other part stopped).
  const replica = await startReplica({ store, logger, dataDir: config.dataDir, ttlMs: config.leaseTtlMs, sharedStores: config.packRegistry.push !== undefined })
  teardown.add('replica', () => replica.stop())
  // Events are durable in the journal before emit() resolves; segments a previous life left
  // behind (kill -9, database down at shutdown) are replayed into the store here.
  const audit = await openAuditWriter(store, { logger, journalDir: join(config.dataDir, 'audit-journal'), ...config.auditJournal })
  const bus = createAuditBus(store, { logger })
  teardown.add('audit', () => audit.close().then(() => bus.close()), { mustSucceed: true })
  await bus.ready
  const boot = await bootstrap(store, audit, { dataDir: config.dataDir, ownerEmail: config.ownerEmail })
  startAuditSinks(config.auditSinks, store, replica, logger, teardown)

  // One CA (the proxy signs with it, the sandboxes trust it) and one token key (the controller mints, the proxy verifies).
  const ca = await loadOrCreateCa(config.dataDir)
  const tokens = new CapabilityTokens(await loadTokenKey(store.settings))

  // serve's own listeners are never upstreams nor OAuth providers; each is added once it listens (read at each connect).
  const listeners: string[] = []
  const ownEndpoints = (): Endpoint[] => [...listeners.flatMap(endpointOf), ...databaseEndpoint(config.dbUrl)]
  // Nor a pack registry's redirects and token realms (src/packs/registry-transport.ts).
  config.packRegistry.client.transport.refuseListeners(ownEndpoints)
  teardown.add('registry client', () => config.packRegistry.client.transport.close())
  // The agents' callbacks (corral.internal) are answered by the workspace lifecycle, built after
  // the proxy (the sandboxes need the proxy's address); until then and after it stops, none.
  let agentCallbacks: AgentCallbackHandler | undefined
  const proxy = await startProxy({
    store, audit, logger, sealer, ca, tokens, dataDir: config.dataDir, host: config.host, port: config.proxyPort, env: config.env,
    upstreamCaFiles: config.upstreamCaFiles,
    ownEndpoints,
    agentCallbacks: () => agentCallbacks,
    ...(replica.leases ? { permits: permitSource(store, replica) } : {}),
  })
  listeners.push(proxy.url)
  teardown.add('proxy', () => proxy.stop())

  const packContent = await openPackContent(config)
  const driver = await openRuntime(config, new URL(proxy.url), logger)
  teardown.add('runtime', () => driver.runtime.close())
  const workspaces = buildWorkspaces(config, { store, audit, logger, tokens, packContent, driver, replica })
  agentCallbacks = workspaces.agentCallbacks
  teardown.add('workspaces', async () => {
    agentCallbacks = undefined
    await workspaces.stop()
  })
  await workspaces.start()

  const deps: ServerDeps = {
    store, audit, bus, logger, auditLog: await startAuditLog(config, store, audit, logger, teardown),
    config: { ...(await serverConfigFromEnv(config.env, config.dataDir)), taskRateLimit: config.taskRateLimit },
    identity: new Identity(await BuiltinIdentityProvider.open(store.settings), config.oidc ? [new OidcIdentityProvider(config.oidc)] : []),
    workspaces: workspaces.directory,
    workspaceControl: workspaces.controller, lifecycle: workspaces.lifecycle,
    packContent, packRegistry: config.packRegistry,
    sealer, oauth: await oauthSettings(config, teardown, ownEndpoints),
    draining: () => drain.on, proxyAccess: { caPem: ca.certPem, caFingerprint: caFingerprint(ca), tokens },
  }
  const api = await startApi(deps, { host: config.host, port: config.port })
  listeners.push(api.url)
  teardown.add('api', () => api.stop())
  await replica.listening({ apiUrl: api.url, proxyUrl: proxy.url })

  return {
    config,
    logger,
    bootstrap: boot,
    url: api.url,
    proxyUrl: proxy.url,
    readyLine: () => `corral ready: api ${api.url}/v1 (proxy ${proxy.url})`,
    stop: () => teardown.run(),
    onFatal: (cb) => replica.onFatal(cb),
  }
}

/**
 * The provable log (docs/audit.md): appender and checkpointer, signing with this data dir's key,
 * yielding to the audit writer's backlog, stopped before the audit writer closes.
 */
async function startAuditLog(config: ServeConfig, store: Store, audit: AuditWriter, logger: Logger, teardown: Teardown): Promise<ProvableLog> {
  const auditLog = new ProvableLog({
    store, logger, signer: await LogSigner.open(config.dataDir),
    ...(config.auditLog.witnessDir ? { witness: new WitnessDir(config.auditLog.witnessDir) } : {}),
    appendIntervalMs: config.auditLog.appendIntervalMs, checkpointIntervalMs: config.auditLog.checkpointIntervalMs,
    thread: { url: config.dbUrl }, writerBusy: () => audit.backlogged(),
  })
  auditLog.start()
  teardown.add('audit log', () => auditLog.stop())
  return auditLog
}

/**
 * OAuth consent's settings: the public URL and a client trusting the same extra roots as the
 * proxy's upstreams, its connections checked like theirs (serve's listeners refused, private
 * ranges only those of CORRAL_OAUTH_ALLOW_PRIVATE).
 */
async function oauthSettings(config: ServeConfig, teardown: Teardown, own: () => Endpoint[]): Promise<NonNullable<ServerDeps['oauth']>> {
  const http = new OAuthHttp({ extraCaPem: await readCaFiles(config.upstreamCaFiles), guard: new AddressGuard(own), allowPrivate: config.oauthAllowPrivate })
  teardown.add('oauth http', () => http.close())
  return { publicUrl: config.publicUrl, http }
}
