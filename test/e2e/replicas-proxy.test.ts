// `corral proxy` on PostgreSQL honours `max_concurrent` through the same database permits as serve
// (src/serve/proxy-alone.ts; docs/proxy.md "Budgets", docs/reliability.md "Replicas"): two
// `corral proxy` processes on one database, 40 parallel requests (20 through each) against a
// `max_concurrent: 3` counter never hold more than 3 at the upstream; each process is a replica row
// of kind `proxy` while it runs and its row goes on SIGTERM. Workers of `corral proxy --workers 2`
// killed with SIGKILL while they hold every permit: their supervisor gives the permits back at once
// (the lease TTL is 300 s here, so waiting it out cannot pass). Needs CORRAL_TEST_PG_URL.
import type { ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import type { ServerResponse } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ProxyAgent, request } from 'undici'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { CapabilityTokens, loadTokenKey } from '../../src/secrets/index.js'
import { openStore, replicaLeases } from '../../src/store/index.js'
import { proxyTables } from '../../src/store/proxy-tables.js'
import { describePostgres } from '../helpers/dialects.js'
import { onLoopback } from '../helpers/loopback-caps.js'
import { startCorralProxy } from '../helpers/corral-proxy.js'
import { createTestDatabase } from '../helpers/serve.js'
import { startUpstreams, type Upstreams } from '../proxy/harness.js'

const CAPS = `
- name: up
  type: http
  allow:
    - domains: ["127.0.0.1"]
      methods: [GET]
  budgets:
    counters:
      - name: calls
        source: request.count
        max_concurrent: 3
`

interface Proxy { child: ChildProcess; url: string; dataDir: string; exited: Promise<number | null> }

function children(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)
  } catch {
    return []
  }
}

const alive = (pid: number): boolean => existsSync(`/proc/${pid}`) && !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'))

async function until<T>(what: string, probe: () => T | Promise<T>, ms = 60_000): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const v = await probe()
    if (v) return v
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

describePostgres('corral proxy takes max_concurrent permits from the database', (baseUrl) => {
  let tmp: string
  let upstreams: Upstreams
  let db: { url: string; drop(): Promise<void> }
  let token: string
  const started: ChildProcess[] = []

  const startProxy = async (name: string, workers = 1, env: Record<string, string> = {}): Promise<Proxy> => {
    const dataDir = join(tmp, name)
    const proxy = await startCorralProxy({
      workers, dataDir, db: db.url, upstreamCa: join(tmp, 'upstream-ca/ca.pem'), env: { CORRAL_MASTER_KEY: 'b2'.repeat(32), ...env }, readyTimeoutMs: 60_000, started,
    })
    return { child: proxy.child, url: proxy.url, dataDir, exited: proxy.exited }
  }

  beforeAll(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'corral-proxy-permits-'))
    upstreams = await startUpstreams(tmp)
    db = await createTestDatabase(baseUrl)
    const store = await openStore(db.url)
    try {
      const org = (await store.orgs.create({ name: 'permits' }))!
      const t = proxyTables(store.db)
      const prov = await t.workspaces.createProvider(org.id, { name: 'none' })
      const role = await t.workspaces.createRole(org.id, { name: 'r', provider_id: prov, capabilities: onLoopback(CAPS, upstreams.httpsPort) })
      const ws = await t.workspaces.create(org.id, { role_id: role, created_by_user_id: 'usr_permits' })
      token = (await new CapabilityTokens(await loadTokenKey(store.settings)).mint({ org_id: org.id, workspace_id: ws }, 3600)).token
    } finally {
      await store.close()
    }
  }, 60_000)

  afterAll(async () => {
    for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL')
    await upstreams?.close()
    await db?.drop()
    rmSync(tmp, { recursive: true, force: true })
  })

  it('40 parallel requests through two corral proxy processes never hold more than max_concurrent 3', async () => {
    let inFlight = 0
    let maxInFlight = 0
    upstreams.handler.current = (_req, res) => {
      inFlight++
      maxInFlight = Math.max(maxInFlight, inFlight)
      setTimeout(() => {
        inFlight--
        res.end('ok')
      }, 200)
    }
    const proxies = await Promise.all([startProxy('p1'), startProxy('p2')])
    const store = await openStore(db.url)
    try {
      const rows = await replicaLeases(store).liveReplicas()
      expect(rows.map((r) => r.kind)).toEqual(['proxy', 'proxy'])
      expect(rows.map((r) => r.proxyUrl).sort()).toEqual(proxies.map((p) => p.url).sort())
    } finally {
      await store.close()
    }
    const agents = proxies.map((p) => new ProxyAgent({ uri: p.url, token: `Bearer ${token}`, requestTls: { ca: readFileSync(join(p.dataDir, 'ca.pem'), 'utf8') }, connections: 20 }))
    let statuses: Array<[number, number]>
    try {
      statuses = await Promise.all(Array.from({ length: 40 }, async (_, i) => {
        const r = await request(`https://127.0.0.1:${upstreams.httpsPort}/c/${i}`, { dispatcher: agents[i % 2]! })
        await r.body.text()
        return [i % 2, r.statusCode] as [number, number]
      }))
    } finally {
      await Promise.all(agents.map((a) => a.close()))
    }
    expect(maxInFlight).toBeGreaterThan(0)
    expect(maxInFlight).toBeLessThanOrEqual(3)
    expect(statuses.filter(([, s]) => s !== 200 && s !== 429)).toEqual([])
    expect(statuses.filter(([, s]) => s === 429).length).toBeGreaterThan(0)
    // Spare permits go back to the database at each proxy's next budget flush (100 ms): after the
    // burst each proxy is admitted again (bounded retries).
    for (const [i, p] of proxies.entries()) {
      const agent = new ProxyAgent({ uri: p.url, token: `Bearer ${token}`, requestTls: { ca: readFileSync(join(p.dataDir, 'ca.pem'), 'utf8') } })
      try {
        let status = 0
        for (let attempt = 0; attempt < 50 && status !== 200; attempt++) {
          if (attempt) await new Promise((r) => setTimeout(r, 100))
          const r = await request(`https://127.0.0.1:${upstreams.httpsPort}/after/${i}`, { dispatcher: agent })
          await r.body.text()
          status = r.statusCode
        }
        expect(status).toBe(200)
      } finally {
        await agent.close()
      }
    }
    for (const p of proxies) p.child.kill('SIGTERM')
    expect(await Promise.all(proxies.map((p) => p.exited))).toEqual([0, 0])
    const after = await openStore(db.url)
    try {
      expect(await replicaLeases(after).liveReplicas()).toEqual([])
    } finally {
      await after.close()
    }
  }, 180_000)

  it("a worker killed with SIGKILL gives its permits back at once: its supervisor releases them, no TTL is waited out", async () => {
    const held: ServerResponse[] = []
    upstreams.handler.current = (_req, res) => void held.push(res)
    const proxy = await startProxy('workers', 2, { CORRAL_LEASE_TTL: '300' })
    const store = await openStore(db.url)
    const permits = async () => (await store.db.selectFrom('concurrency_permits' as never).select(['holder', 'count'] as never[]).execute()) as unknown as Array<{ holder: string; count: number }>
    const ca = readFileSync(join(tmp, 'workers', 'ca.pem'), 'utf8')
    // The held requests keep their three connections busy: probes go through an agent of their own.
    const agent = new ProxyAgent({ uri: proxy.url, token: `Bearer ${token}`, requestTls: { ca }, connections: 3 })
    const probes = new ProxyAgent({ uri: proxy.url, token: `Bearer ${token}`, requestTls: { ca } })
    const get = async (path: string, dispatcher = probes) => {
      const r = await request(`https://127.0.0.1:${upstreams.httpsPort}${path}`, { dispatcher })
      await r.body.text()
      return r.statusCode
    }
    try {
      const before = await replicaLeases(store).liveReplicas()
      expect(before.map((r) => r.kind)).toEqual(['proxy', 'proxy'])
      // Every permit of max_concurrent 3 held by requests the upstream does not answer.
      const stuck = Array.from({ length: 3 }, (_, i) => get(`/held/${i}`, agent).catch(() => 0))
      await until('three requests held at the upstream', () => held.length === 3)
      expect((await permits()).reduce((n, p) => n + Number(p.count), 0)).toBe(3)
      expect(await get('/refused')).toBe(429)

      // One worker at a time, each replacement listening (its row names its URL) before the next kill:
      // with both gone at once the shared port-0 listener would be made anew on another port.
      const dead = new Set(before.map((r) => r.id))
      const workers = children(proxy.child.pid!)
      expect(workers).toHaveLength(2)
      for (const [i, pid] of workers.entries()) {
        process.kill(pid, 'SIGKILL')
        await until('the worker replaced', async () => !alive(pid) && (await replicaLeases(store).liveReplicas()).filter((r) => !dead.has(r.id) && r.proxyUrl).length === i + 1)
      }
      await Promise.all(stuck)
      // Released by the supervisor: within seconds, where the TTL would hold them for 300 s.
      await until('the dead workers\' permits to be released', async () => (await permits()).every((p) => !dead.has(p.holder)))
      upstreams.handler.current = (_req, res) => res.end('ok')
      expect(await until('a request admitted through the replacements', async () => (await get('/after').catch(() => 0)) === 200)).toBe(true)
      const after = await replicaLeases(store).liveReplicas()
      expect(after.map((r) => r.kind)).toEqual(['proxy', 'proxy'])
      expect(after.filter((r) => dead.has(r.id))).toEqual([])
    } finally {
      for (const res of held) res.destroy()
      await Promise.all([agent.destroy(), probes.destroy()])
      await store.close()
    }
    proxy.child.kill('SIGTERM')
    expect(await proxy.exited).toBe(0)
  }, 240_000)
})
