// The proxy as one of `corral serve`'s services (registered in src/server/serve.ts SERVICES).
// Port: `proxyPort` option, else CORRAL_PROXY_PORT, else 7071 — or a free port when the API
// itself was asked for port 0 (tests and parallel serves). Extra upstream roots: CORRAL_UPSTREAM_CA
// (comma-separated PEM files). Workspace teardown: the workspace part publishes the workspace id
// on WORKSPACE_STOPPED_CHANNEL after stop/archive; every proxy process deactivates it.
import { readFile } from 'node:fs/promises'
import type { ServiceFactory } from '../server/serve.js'
import { DEFAULT_PROXY_PORT, ProxyService } from './service.js'
import type { Endpoint } from './address-guard.js'

export const WORKSPACE_STOPPED_CHANNEL = 'corral_workspace_stopped'

export async function readCaFiles(list: string | undefined): Promise<string[] | undefined> {
  if (!list) return undefined
  return Promise.all(list.split(',').filter(Boolean).map((f) => readFile(f.trim(), 'utf8')))
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
  if (!dbUrl || !/^postgres(ql)?:\/\//.test(dbUrl)) return []
  try {
    const u = new URL(dbUrl)
    return [{ host: u.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1', port: Number(u.port || 5432) }]
  } catch {
    return []
  }
}

export const proxyService: ServiceFactory = async ({ deps, options, services }) => {
  const env = options.env ?? process.env
  const explicit = (options as { proxyPort?: number }).proxyPort ?? (env.CORRAL_PROXY_PORT ? Number(env.CORRAL_PROXY_PORT) : undefined)
  const port = explicit ?? (options.port === 0 ? 0 : DEFAULT_PROXY_PORT)
  const upstreamCaPem = await readCaFiles(env.CORRAL_UPSTREAM_CA)
  const db = databaseEndpoint(options.dbUrl)
  const proxy = new ProxyService({
    store: deps.store, audit: deps.audit, dataDir: options.dataDir, port, host: options.host, sealer: deps.sealer, env, logger: deps.logger,
    ...(upstreamCaPem ? { upstreamCaPem } : {}),
    // Every listener of serve (services start after the proxy, so the list is read at each connect).
    ownEndpoints: () => [...services.flatMap((s) => endpointOf(s.address?.())), ...db],
    // The workspace service builds the handler after the proxy listens: read at each callback.
    agentCallbacks: () => deps.agentCallbacks,
  })
  let unlisten: (() => Promise<void>) | undefined
  return {
    name: 'proxy',
    async start() {
      await proxy.start()
      unlisten = await deps.store.listen(WORKSPACE_STOPPED_CHANNEL, (id) => void proxy.workspaces.deactivate(id))
    },
    async stop() {
      await unlisten?.()
      await proxy.stop()
    },
    address: () => (proxy.port === undefined ? undefined : `http://${options.host.includes(':') ? `[${options.host}]` : options.host}:${proxy.port}`),
  }
}
