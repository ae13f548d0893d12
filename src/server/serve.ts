// The `corral serve` process: open the store, build the shared deps, bootstrap on first start,
// start every service in SERVICES order, print one ready line, and on SIGTERM stop them in
// reverse (the API drains in-flight requests), flush the audit writer, close the store, exit 0.
// Another part adds its listener (the outbound proxy) as one more entry in SERVICES.
import { mkdir } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import type { Logger } from 'pino'
import { createAuditBus, openAuditWriter } from '../audit/index.js'
import { packService } from '../packs/service.js'
import { proxyService } from '../proxy/serve-service.js'
import { workspaceService } from '../runtime/controller/service.js'
import { Sealer, loadMasterKey } from '../secrets/index.js'
import { openStore } from '../store/index.js'
import { buildApp } from './app.js'
import { bootstrap, type BootstrapResult } from './bootstrap.js'
import { oidcConfigFromEnv, serverConfigFromEnv } from './config.js'
import { BuiltinIdentityProvider, Identity, OidcIdentityProvider } from './identity/index.js'
import { createLogger } from './logger.js'
import type { ServerDeps } from './types.js'

export interface Service {
  readonly name: string
  start(): Promise<void>
  stop(): Promise<void>
  /** Shown in the ready line, e.g. `http://127.0.0.1:7070`. */
  address?(): string | undefined
}

export interface ServeOptions {
  dataDir: string
  /** Store URL; default `sqlite:<data-dir>/corral.db`. */
  dbUrl?: string
  host: string
  port: number
  env?: NodeJS.ProcessEnv
  logger?: Logger
  /** Every parsed `serve` flag, so a service can read its own (e.g. the proxy's port). */
  flags?: Readonly<Record<string, unknown>>
}

export interface ServeContext {
  readonly options: Readonly<ServeOptions>
  readonly deps: ServerDeps
  readonly bootstrap: BootstrapResult
  /** Services already started (earlier entries of SERVICES), e.g. the proxy for its address. */
  readonly services: readonly Service[]
}

export type ServiceFactory = (ctx: ServeContext) => Service | Promise<Service>

export const defaultDbUrl = (dataDir: string) => `sqlite:${join(dataDir, 'corral.db')}`

/** The HTTP API: buildApp + listen; stop = fastify close (refuses new requests, drains in-flight ones). */
export const apiService: ServiceFactory = async ({ deps, options }) => {
  const app = await buildApp(deps)
  let url: string | undefined
  return {
    name: 'api',
    async start() {
      await app.listen({ host: options.host, port: options.port })
      const addr = app.server.address()
      if (addr && typeof addr === 'object') {
        const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address
        url = `http://${host}:${addr.port}`
      }
    },
    stop: () => app.close(),
    address: () => url,
  }
}

/** Started in order, stopped in reverse. */
export const SERVICES: ServiceFactory[] = [proxyService, packService, workspaceService, apiService]

export interface RunningServe {
  readonly services: readonly Service[]
  readonly deps: ServerDeps
  readonly bootstrap: BootstrapResult
  /** API base URL (without /v1). */
  readonly url: string
  readyLine(): string
  stop(): Promise<void>
}

export async function startServe(options: ServeOptions): Promise<RunningServe> {
  const env = options.env ?? process.env
  const dataDir = resolve(options.dataDir)
  await mkdir(dataDir, { recursive: true, mode: 0o700 })
  const logger = options.logger ?? createLogger()
  // One master key for the routes that seal and the proxy that opens (src/secrets); a bad
  // CORRAL_MASTER_KEY refuses the start before anything is opened.
  const sealer = new Sealer(await loadMasterKey(dataDir, env))
  const store = await openStore(options.dbUrl ?? defaultDbUrl(dataDir))
  // Events are durable in the journal before emit() resolves; segments a previous life left
  // behind (kill -9, database down at shutdown) are replayed into the store here.
  const audit = await openAuditWriter(store, { logger, journalDir: join(dataDir, 'audit-journal') }).catch(async (err: unknown) => {
    await store.close().catch(() => {})
    throw err
  })
  const bus = createAuditBus(store, { logger })
  await bus.ready
  const oidc = oidcConfigFromEnv(env)
  const identity = new Identity(await BuiltinIdentityProvider.open(store.settings), oidc ? [new OidcIdentityProvider(oidc)] : [])
  const deps: ServerDeps = {
    store,
    audit,
    bus,
    logger,
    config: await serverConfigFromEnv(env, dataDir),
    identity,
    sealer,
  }
  const boot = await bootstrap(store, audit, { dataDir, ownerEmail: env.CORRAL_OWNER_EMAIL })
  const started: Service[] = []
  const ctx: ServeContext = { options: { ...options, dataDir }, deps, bootstrap: boot, services: started }

  const stop = async () => {
    for (const service of [...started].reverse()) {
      await service.stop().catch((err: unknown) => logger.error({ err, service: service.name }, 'service did not stop cleanly'))
    }
    await audit.close()
    await bus.close()
    await store.close()
  }
  try {
    for (const factory of SERVICES) {
      const service = await factory(ctx)
      await service.start()
      started.push(service)
    }
  } catch (err) {
    await stop().catch(() => {})
    throw err
  }
  const url = started.find((s) => s.name === 'api')?.address?.() ?? ''
  return {
    services: started,
    deps,
    bootstrap: boot,
    url,
    readyLine: () => {
      const others = started.filter((s) => s.name !== 'api' && s.address?.()).map((s) => `${s.name} ${s.address!()}`)
      return `corral ready: api ${url}/v1${others.length ? ` (${others.join(', ')})` : ''}`
    },
    stop,
  }
}
