// The chaos suite's parts: a real `corral serve` (the built binary) that a test kills with SIGKILL
// and starts again on the same data dir and database, an HTTPS upstream on loopback that counts
// what it served, agents that send proxied requests through undici's ProxyAgent and remember every
// answer they received, API clients that remember every mutation answered 2xx, and a read of the
// audit table straight from the store once `serve` is back.
import { createServer, type Server } from 'node:https'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { ProxyAgent, fetch as undiciFetch } from 'undici'
import { LeafMinter, loadOrCreateCa } from '../../src/proxy/ca.js'
import { CapabilityTokens, loadTokenKey } from '../../src/secrets/index.js'
import { openStore, type Store } from '../../src/store/index.js'
import { proxyTables } from '../../src/store/proxy-tables.js'
import { startServe, type RunningServe } from '../helpers/serve.js'

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))

/** An HTTPS upstream with its own CA; counts requests per path prefix and answers a small JSON document. */
export interface Upstream { port: number; caFile: string; served: Map<string, number>; /** Every path it received, in order. */ paths: string[]; close(): Promise<void> }

export async function startUpstream(dir: string): Promise<Upstream> {
  const ca = await loadOrCreateCa(join(dir, 'upstream-ca'))
  const caFile = join(dir, 'upstream-ca.pem')
  writeFileSync(caFile, ca.certPem)
  const served = new Map<string, number>()
  const paths: string[] = []
  const server: Server = createServer(await new LeafMinter(ca).pemFor('127.0.0.1'), (req, res) => {
    paths.push(req.url ?? '/')
    const prefix = (req.url ?? '/').split('/')[1] ?? ''
    req.resume()
    req.on('end', () => {
      served.set(prefix, (served.get(prefix) ?? 0) + 1)
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ ok: true, usage: { output_tokens: TOKENS_PER_RESPONSE } }))
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    port: (server.address() as AddressInfo).port,
    caFile,
    served,
    paths,
    close: async () => {
      server.closeAllConnections()
      await new Promise((r) => server.close(r))
    },
  }
}

export const TOKENS_PER_RESPONSE = 7

export interface Chaos {
  dir: string
  dataDir: string
  db: string
  upstream: Upstream
  serve: RunningServe
  proxyUrl: string
  /** SIGKILL, wait for the exit. */
  kill9(): Promise<void>
  /** Starts `serve` again on the same data dir and database. */
  restart(): Promise<void>
  store<T>(f: (s: Store) => Promise<T>): Promise<T>
  close(): Promise<void>
}

/** `db` default: the SQLite file in the data dir; `dataDir` default: a directory of its own (not removed by close() when given). */
export async function startChaos(opts: { db?: string; env?: Record<string, string>; dataDir?: string } = {}): Promise<Chaos> {
  const dir = mkdtempSync(join(tmpdir(), 'corral-chaos-'))
  const dataDir = opts.dataDir ?? join(dir, 'data')
  const db = opts.db ?? `sqlite:${join(dataDir, 'corral.db')}`
  const upstream = await startUpstream(dir)
  const env = { CORRAL_UPSTREAM_CA: upstream.caFile, ...opts.env }
  const start = (): Promise<RunningServe> => startServe({ dataDir, ...(opts.db ? { db: opts.db } : {}), env, args: ['--proxy-port', '0'], timeoutMs: 40_000 })
  const c: Chaos = {
    dir, dataDir, db, upstream,
    serve: await start(),
    proxyUrl: '',
    async kill9() {
      const p = c.serve.process
      if (p.exitCode !== null || p.signalCode !== null) return
      const gone = new Promise((r) => p.once('exit', r))
      p.kill('SIGKILL')
      await gone
    },
    async restart() {
      c.serve = await start()
      c.proxyUrl = proxyUrlOf(c.serve)
    },
    async store(f) {
      const s = await openStore(db)
      try {
        return await f(s)
      } finally {
        await s.close()
      }
    },
    async close() {
      await c.serve.stop({ keepDataDir: true }).catch(() => null)
      await upstream.close()
      rmSync(dir, { recursive: true, force: true })
    },
  }
  c.proxyUrl = proxyUrlOf(c.serve)
  return c
}

function proxyUrlOf(s: RunningServe): string {
  const m = /proxy (http:\/\/[^\s,)]+)/.exec(s.output())
  if (!m) throw new Error(`no proxy address in the ready line:\n${s.output()}`)
  return m[1]!
}

/** A workspace with the given caps.yaml in the `default` org, and a capability token for it. */
export async function seedWorkspace(c: Chaos, caps: string): Promise<{ orgId: string; workspaceId: string; token: string; caPem: string }> {
  return c.store(async (store) => {
    const org = (await store.orgs.getByName('default'))!
    const t = proxyTables(store.db)
    const prov = await t.workspaces.createProvider(org.id, { name: `chaos-${randomBytes(3).toString('hex')}` })
    const role = await t.workspaces.createRole(org.id, { name: `chaos-${randomBytes(3).toString('hex')}`, provider_id: prov, capabilities: caps })
    const workspaceId = await t.workspaces.create(org.id, { role_id: role, created_by_user_id: 'usr_chaos' })
    const tokens = new CapabilityTokens(await loadTokenKey(store.settings))
    const { token } = await tokens.mint({ org_id: org.id, workspace_id: workspaceId }, 3600)
    const caPem = (await loadOrCreateCa(c.dataDir)).certPem
    return { orgId: org.id, workspaceId, token, caPem }
  })
}

/** What a load loop saw: answers received (fully read) and failures (no answer). */
export interface Tally {
  answered: { path: string; status: number; ms: number; reason?: string }[]
  failed: number
  /** performance.now() at which each failed request had started */
  failedStarts?: number[]
}

/**
 * `concurrency` agents, each on its own keep-alive ProxyAgent, sending requests to unique paths
 * `/<prefix>/<run>-<n>` until `stop` is aborted (`tally`, when given, is filled as answers come). A request counts as answered only when its whole
 * body was read (the client received the answer). `proxyUrl` is read per request (restarts).
 */
export function agentLoad(o: { proxyUrl: () => string; token: string; caPem: string; port: number; prefixes: string[]; concurrency: number; stop: AbortSignal; method?: 'GET' | 'POST'; /** filled live */ tally?: Tally }): Promise<Tally> {
  const tally: Tally = o.tally ?? { answered: [], failed: 0 }
  const run = randomBytes(3).toString('hex')
  let n = 0
  const one = async (worker: number): Promise<void> => {
    let agent: ProxyAgent | undefined
    let agentFor = ''
    try {
      while (!o.stop.aborted) {
        if (agentFor !== o.proxyUrl()) {
          await agent?.destroy().catch(() => {})
          agentFor = o.proxyUrl()
          agent = new ProxyAgent({ uri: agentFor, token: `Bearer ${o.token}`, requestTls: { ca: o.caPem }, connections: 1 })
        }
        const prefix = o.prefixes[(n + worker) % o.prefixes.length]!
        const path = `/${prefix}/${run}-${n++}`
        const t0 = performance.now()
        try {
          const res = await undiciFetch(`https://127.0.0.1:${o.port}${path}`, {
            method: o.method ?? 'POST', dispatcher: agent,
            ...(o.method === 'GET' ? {} : { body: JSON.stringify({ model: 'm', n }), headers: { 'content-type': 'application/json' } }),
            signal: AbortSignal.timeout(10_000),
          })
          await res.arrayBuffer()
          const reason = res.headers.get('x-corral-deny-reason')
          tally.answered.push({ path, status: res.status, ms: performance.now() - t0, ...(reason ? { reason } : {}) })
        } catch {
          tally.failed++
          tally.failedStarts?.push(t0)
          await sleep(20) // serve is down: do not spin
        }
      }
    } finally {
      await agent?.destroy().catch(() => {})
    }
  }
  return Promise.all(Array.from({ length: o.concurrency }, (_, i) => one(i))).then(() => tally)
}

export interface MutationTally { secrets: string[]; keys: string[]; statuses: Map<number, number>; failed: number; retryAfter: number; envelopes: number }
export const newMutationTally = (): MutationTally => ({ secrets: [], keys: [], statuses: new Map(), failed: 0, retryAfter: 0, envelopes: 0 })

/** Resolves once `ready()` holds (polled every 50 ms), or after `maxMs`. */
export async function until(ready: () => boolean, maxMs: number): Promise<void> {
  const end = Date.now() + maxMs
  while (!ready() && Date.now() < end) await sleep(50)
}

/**
 * `concurrency` API clients creating secrets and API keys until `stop`; records the names / ids of
 * every mutation answered 2xx, and for 503s whether they carried Retry-After and the envelope.
 */
export function apiLoad(o: { url: () => string; key: string; concurrency: number; stop: AbortSignal; /** filled live */ tally?: MutationTally }): Promise<MutationTally> {
  const t: MutationTally = o.tally ?? newMutationTally()
  const run = randomBytes(3).toString('hex')
  let n = 0
  const one = async (): Promise<void> => {
    while (!o.stop.aborted) {
      const i = n++
      const secret = i % 2 === 0
      const name = `chaos_${run}_${i}`
      try {
        const res = await fetch(`${o.url()}/v1/${secret ? 'secrets' : 'api-keys'}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${o.key}`, 'content-type': 'application/json' },
          body: JSON.stringify(secret ? { name, value: `v-${i}` } : { label: name, permission_set: 'read_only' }),
          signal: AbortSignal.timeout(10_000),
        })
        const body = (await res.json().catch(() => undefined)) as { id?: string; error?: { code?: string } } | undefined
        t.statuses.set(res.status, (t.statuses.get(res.status) ?? 0) + 1)
        if (res.status >= 200 && res.status < 300) {
          if (secret) t.secrets.push(name)
          else t.keys.push(body!.id!)
        } else if (res.status === 503) {
          if (res.headers.get('retry-after')) t.retryAfter++
          if (typeof body?.error?.code === 'string') t.envelopes++
        }
      } catch {
        t.failed++
        await sleep(20)
      }
    }
  }
  return Promise.all(Array.from({ length: o.concurrency }, () => one())).then(() => t)
}

export interface AuditRow { id: string; org_id: string; event_type: string; path: string | null; decision: string | null; reason: string | null; detail: unknown }

/** Every audit row of these types, straight from the table (whatever org). */
export async function auditRows(store: Store, types: string[]): Promise<AuditRow[]> {
  const db = store.db as unknown as import('kysely').Kysely<{ audit_events: AuditRow }>
  const rows = await db.selectFrom('audit_events').select(['id', 'org_id', 'event_type', 'path', 'decision', 'reason', 'detail']).where('event_type', 'in', types).execute()
  return rows.map((r) => ({ ...r, detail: typeof r.detail === 'string' ? JSON.parse(r.detail) : r.detail }))
}

/** Paths of answered requests that have no policy_decision row, and paths with more than one. */
export function missingDecisions(answered: { path: string }[], rows: AuditRow[]): { missing: string[]; duplicated: string[] } {
  const count = new Map<string, number>()
  for (const r of rows) if (r.event_type === 'policy_decision' && r.path) count.set(r.path, (count.get(r.path) ?? 0) + 1)
  return {
    missing: answered.filter((a) => !count.has(a.path)).map((a) => a.path),
    duplicated: [...count].filter(([, n]) => n > 1).map(([p]) => p),
  }
}

/** Mutations answered 2xx that have no audit row. */
export function missingMutations(t: MutationTally, rows: AuditRow[]): { secrets: string[]; keys: string[] } {
  const ids = new Set<string>()
  for (const r of rows) {
    const d = r.detail as { resource_id?: string } | null
    if (d?.resource_id) ids.add(`${r.event_type}:${d.resource_id}`)
  }
  return {
    secrets: t.secrets.filter((s) => !ids.has(`secret_created:${s}`)),
    keys: t.keys.filter((k) => !ids.has(`api_key_created:${k}`)),
  }
}

/** One allow rule (caps.yaml lines) for `/<path>/*` on the loopback upstream at `port`, naming its private range. */
export function loopbackRule(port: number, path: string, methods: string[]): string {
  return `    - domains: ["127.0.0.1:${port}"]
      allow_private: ["127.0.0.0/8"]
      methods: [${methods.join(', ')}]
      paths: ["/${path}/*"]
`
}

/**
 * The caps.yaml the suite's workspaces use: the loopback upstream on its port (a private address,
 * so the rule names the range: docs/policy.md "Destinations"), JSON POSTs, optional budget counters.
 */
export function chaosCaps(port: number, budgets?: { calls: number; tokens: number }): string {
  const rule = (path: string) => loopbackRule(port, path, ['POST', 'GET'])
  if (!budgets) return `- name: chaos
  type: http
  allow:
${rule('chaos')}`
  return `- name: calls
  type: http
  allow:
${rule('calls')}  budgets:
    counters:
      - name: calls
        source: request.count
        workspace: { max: ${budgets.calls} }
- name: tokens
  type: http
  allow:
${rule('tokens')}  transforms:
    - header: { name: accept-encoding, action: set, value: '"identity"' }
  budgets:
    counters:
      - name: tokens
        source: response
        requires_body: true
        framing: single_document
        format: application/json
        encoding: identity
        value: response.body.usage.output_tokens
        accumulator: last
        status_codes: ["2xx"]
        workspace: { max: ${budgets.tokens} }
`
}
