// Real-socket harness for proxy tests: a SQLite store in a temp dir, an audit sink that records
// rows, an HTTPS upstream on loopback with its own test CA, the proxy service, and clients that
// use the proxy the way agents do (undici ProxyAgent, curl -x).
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https'
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ProxyAgent, fetch as undiciFetch } from 'undici'
import type { AuditEvent, AuditSink, NewAuditEvent } from '../../src/contract/index.js'
import { stamp } from '../../src/audit/writer.js'
import { LeafMinter, loadOrCreateCa } from '../../src/proxy/ca.js'
import { ProxyService, type ProxyServiceOptions } from '../../src/proxy/service.js'
import { openStore, type Store } from '../../src/store/index.js'
import { proxyTables } from '../../src/store/proxy-tables.js'
import { onLoopback } from '../helpers/loopback-caps.js'

/**
 * Records every row in memory (the tests' window on what the proxy emitted), after the real
 * writer's validation (`stamp`), so a row production would refuse fails here too.
 */
export class RecordingAudit implements AuditSink {
  readonly rows: AuditEvent[] = []
  async emit(event: NewAuditEvent): Promise<AuditEvent> {
    const row = stamp(event)
    this.rows.push(row)
    return row
  }
  decisions(): AuditEvent[] {
    return this.rows.filter((r) => r.event_type === 'policy_decision')
  }
  /** Waits until `n` decision rows exist (the allow row is written after the response ends). */
  async waitForDecisions(n: number, timeoutMs = 5_000): Promise<AuditEvent[]> {
    const end = Date.now() + timeoutMs
    while (this.decisions().length < n && Date.now() < end) await new Promise((r) => setTimeout(r, 5))
    return this.decisions()
  }
}

export type Handler = (req: IncomingMessage, res: ServerResponse) => void

export interface Upstreams {
  https: HttpsServer
  http: HttpServer
  httpsPort: number
  httpPort: number
  caPem: string
  handler: { current: Handler }
  close(): Promise<void>
}

export async function startUpstreams(dir: string): Promise<Upstreams> {
  const ca = await loadOrCreateCa(join(dir, 'upstream-ca'))
  const minter = new LeafMinter(ca)
  const handler = { current: ((_req, res) => res.end('ok')) as Handler }
  // Upstream URLs use 127.0.0.1 (no SNI): the default certificate carries that IP as its SAN.
  const https = createHttpsServer({ ...(await minter.pemFor('127.0.0.1')), keepAlive: true }, (req, res) => handler.current(req, res))
  const http = createHttpServer((req, res) => handler.current(req, res))
  await new Promise<void>((r) => https.listen(0, '127.0.0.1', r))
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r))
  return {
    https, http, handler, caPem: ca.certPem,
    httpsPort: (https.address() as AddressInfo).port,
    httpPort: (http.address() as AddressInfo).port,
    async close() {
      https.closeAllConnections(); http.closeAllConnections()
      await Promise.all([new Promise((r) => https.close(r)), new Promise((r) => http.close(r))])
    },
  }
}

export interface Harness {
  dir: string
  store: Store
  audit: RecordingAudit
  proxy: ProxyService
  proxyUrl: string
  up: Upstreams
  orgId: string
  userId: string
  tables: ReturnType<typeof proxyTables>
  /**
   * A workspace whose role has `capabilities` (null: no policy). The upstreams listen on loopback
   * ports chosen at start, so unless `raw` is set the policy is rewritten with onLoopback().
   */
  workspace(capabilities: string | null, state?: string, opts?: { raw?: boolean }): Promise<{ workspaceId: string; roleId: string; token: string }>
  token(workspaceId: string, opts?: { task?: string; ttl?: number; org?: string }): Promise<string>
  /** A real task row (submitted) in the workspace: task tokens reach the proxy only while theirs is live. */
  task(workspaceId: string): Promise<string>
  /** fetch through the proxy like an agent (CONNECT for https, absolute URI for http). */
  fetch(url: string, init: { token?: string; method?: string; body?: string; headers?: Record<string, string> }): Promise<{ status: number; body: string; headers: Headers }>
  /** Like fetch, but hands back the undici Response so a test can read the body as it streams. */
  /** Stops the proxy and closes the store, then opens both again on the same data (a process restart). */
  restart(): Promise<void>
  open(url: string, init: { token?: string; method?: string; body?: string; headers?: Record<string, string> }): Promise<Response>
  close(): Promise<void>
}

export async function startHarness(opts: Partial<ProxyServiceOptions> & { dbUrl?: string } = {}): Promise<Harness> {
  const dir = await mkdtemp(join(tmpdir(), 'corral-proxy-'))
  const store = opts.store ?? (await openStore(opts.dbUrl ?? `sqlite:${join(dir, 'corral.db')}`))
  const audit = new RecordingAudit()
  const up = await startUpstreams(dir)
  const dbUrl = opts.dbUrl ?? `sqlite:${join(dir, 'corral.db')}`
  const makeProxy = (st: Store) => new ProxyService({ audit, dataDir: join(dir, 'data'), port: 0, upstreamCaPem: [up.caPem], ...opts, store: st } as ProxyServiceOptions)
  let proxy = makeProxy(store)
  const port = await proxy.start()
  const org = await store.orgs.create({ name: `org-${Math.random().toString(36).slice(2)}` })
  const user = await store.users.create({ email: `u${Math.random().toString(36).slice(2)}@example.com` })
  const tables = proxyTables(store.db)
  const providerId = await tables.workspaces.createProvider(org!.id, { name: 'anthropic' })
  const agents: ProxyAgent[] = []
  const h: Harness = {
    dir, store, audit, proxy, up, tables, orgId: org!.id, userId: user.id,
    proxyUrl: `http://127.0.0.1:${port}`,
    async workspace(capabilities, state = 'idle', o = {}) {
      if (capabilities !== null && !o.raw) capabilities = onLoopback(capabilities, up.httpsPort, up.httpPort)
      const roleId = await h.tables.workspaces.createRole(org!.id, { name: `role-${Math.random().toString(36).slice(2)}`, provider_id: providerId, capabilities })
      const workspaceId = await h.tables.workspaces.create(org!.id, { role_id: roleId, created_by_user_id: user.id, state })
      return { workspaceId, roleId, token: await h.token(workspaceId) }
    },
    async restart() {
      await Promise.all(agents.splice(0).map((a) => a.close().catch(() => {})))
      await h.proxy.stop()
      await h.store.close()
      h.store = await openStore(dbUrl)
      h.tables = proxyTables(h.store.db)
      proxy = makeProxy(h.store)
      h.proxy = proxy
      h.proxyUrl = `http://127.0.0.1:${await proxy.start()}`
    },
    async task(workspaceId) {
      const t = await h.store.workspaces.tasks.create(org!.id, { workspace_id: workspaceId, description: 'test task', options: {}, created_by: user.id })
      return t.id
    },
    async token(workspaceId, o = {}) {
      const minted = await proxy.tokens.mint({ org_id: o.org ?? org!.id, workspace_id: workspaceId, ...(o.task ? { task_id: o.task } : {}) }, o.ttl ?? 600)
      return minted.token
    },
    async fetch(url, init) {
      const res = await h.open(url, init)
      return { status: res.status, body: await res.text(), headers: res.headers as unknown as Headers }
    },
    async open(url, init) {
      const agent = new ProxyAgent({
        uri: h.proxyUrl,
        ...(init.token !== undefined ? { token: `Bearer ${init.token}` } : {}),
        requestTls: { ca: proxy.ca.certPem },
        proxyTunnel: url.startsWith('https:'),
      })
      agents.push(agent)
      const signal = (init as { signal?: AbortSignal }).signal
      return (await undiciFetch(url, { dispatcher: agent, ...(signal ? { signal } : {}), method: init.method ?? 'GET', ...(init.body !== undefined ? { body: init.body } : {}), ...(init.headers ? { headers: init.headers } : {}) })) as unknown as Response
    },
    async close() {
      await Promise.all(agents.map((a) => a.close().catch(() => {})))
      await h.proxy.stop()
      await up.close()
      await h.store.close()
      await rm(dir, { recursive: true, force: true })
    },
  }
  return h
}
