// The outbound policy proxy as serve builds it (and `corral proxy` alone): the ProxyService over
// the shared store, audit writer and sealer, plus the one piece of glue it needs from outside —
// a workspace stopped on any replica (the controller notifies WORKSPACE_STOPPED_CHANNEL) is
// deactivated in this proxy process too.
import { readFile } from 'node:fs/promises'
import type { Logger } from 'pino'
import type { AuditWriter } from '../audit/index.js'
import { ProxyService, type AgentCallbacks, type ConcurrencyPermitSource, type CorralCa, type Endpoint } from '../proxy/index.js'
import type { CapabilityTokens, Sealer } from '../secrets/index.js'
import { ROLES_CHANGED_CHANNEL, WORKSPACE_STOPPED_CHANNEL, concurrencyPermits, storeServer, type Store } from '../store/index.js'

export interface ProxyParts {
  store: Store
  audit: AuditWriter
  logger: Logger
  sealer: Sealer
  /** The corral CA (leaf certificates per SNI; the sandboxes trust it) and the capability-token verifier. */
  ca: CorralCa
  tokens: CapabilityTokens
  dataDir: string
  host: string
  port: number
  env: NodeJS.ProcessEnv
  /** PEM files trusted for upstream TLS besides the system roots. */
  upstreamCaFiles: readonly string[]
  /** serve's own listeners (API, database, the proxy itself): never reachable through the proxy; read at each connect. */
  ownEndpoints?: () => readonly Endpoint[]
  /** Who answers the agents' callbacks to corral.internal (the workspace lifecycle); read at each callback. */
  agentCallbacks?: AgentCallbacks
  /** `max_concurrent` permits shared by every replica (PostgreSQL; permitSource below). */
  permits?: ConcurrencyPermitSource
}

export interface RunningProxy {
  readonly service: ProxyService
  /** `http://host:port`. */
  readonly url: string
  stop(): Promise<void>
}

export async function startProxy(parts: ProxyParts): Promise<RunningProxy> {
  const upstreamCaPem = await readCaFiles(parts.upstreamCaFiles)
  const service = new ProxyService({
    store: parts.store, audit: parts.audit, dataDir: parts.dataDir, port: parts.port, host: parts.host,
    sealer: parts.sealer, ca: parts.ca, tokens: parts.tokens, env: parts.env, logger: parts.logger,
    ...(upstreamCaPem.length ? { upstreamCaPem } : {}),
    ...(parts.ownEndpoints ? { ownEndpoints: parts.ownEndpoints } : {}),
    ...(parts.agentCallbacks ? { agentCallbacks: parts.agentCallbacks } : {}),
    ...(parts.permits ? { permits: parts.permits } : {}),
  })
  const port = await service.start()
  const unlistens = await Promise.all([
    parts.store.listen(WORKSPACE_STOPPED_CHANNEL, (id) => void service.workspaces.deactivate(id)),
    // A role or provider changed on any replica: the org's policies are loaded again.
    parts.store.listen(ROLES_CHANGED_CHANNEL, (orgId) => service.workspaces.refreshOrg(orgId)),
  ]).catch(async (err: unknown) => {
    await service.stop()
    throw err
  })
  const unlisten = async () => {
    for (const u of unlistens) await u()
  }
  return {
    service,
    url: `http://${parts.host.includes(':') ? `[${parts.host}]` : parts.host}:${port}`,
    async stop() {
      await unlisten()
      await service.stop()
    },
  }
}

export async function readCaFiles(files: readonly string[]): Promise<string[]> {
  return Promise.all(files.map((f) => readFile(f, 'utf8')))
}

/** host:port of an `http://host:port` address. */
export function endpointOf(url: string | undefined): Endpoint[] {
  if (!url) return []
  try {
    const u = new URL(url)
    return u.port ? [{ host: u.hostname.replace(/^\[|\]$/g, ''), port: Number(u.port) }] : []
  } catch {
    return []
  }
}

/** The database server of a postgres:// URL (SQLite has none). */
export function databaseEndpoint(dbUrl: string | undefined): Endpoint[] {
  const server = storeServer(dbUrl)
  return server ? [server] : []
}

/** A replica's `max_concurrent` permits in the database, held under its id (its heartbeat keeps them). */
export function permitSource(store: Store, replica: { id: string; ttlMs: number }): ConcurrencyPermitSource {
  const permits = concurrencyPermits(store)
  return {
    take: (key, max, want) => permits.takePermits(key, replica.id, max, want, replica.ttlMs),
    give: (key, n) => permits.returnPermits(key, replica.id, n),
  }
}
