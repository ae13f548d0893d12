// `corral proxy --workers N` (src/serve/proxy-workers.ts): N worker processes answer on one port,
// every answered request has exactly one decision row, a worker killed with SIGKILL is replaced and
// the rows it journaled are kept, and the workers stop when their primary is killed -9.
import BetterSqlite3 from 'better-sqlite3'
import type { ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { createServer, type AddressInfo } from 'node:net'
import { join } from 'node:path'
import { ProxyAgent, request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Sealer, CapabilityTokens, loadMasterKey, loadTokenKey } from '../../src/secrets/index.js'
import { openStore } from '../../src/store/index.js'
import { proxyTables } from '../../src/store/proxy-tables.js'
import { onLoopback } from '../helpers/loopback-caps.js'
import { startCorralProxy, type CorralProxy } from '../helpers/corral-proxy.js'
import { runCorral } from '../helpers/serve.js'
import { startUpstreams, type Upstreams } from '../proxy/harness.js'

const CAPS = `
- name: up
  type: http
  allow:
    - name: ping
      domains: ["127.0.0.1"]
      methods: [GET]
      paths: ["/ping"]
`

type Proxy = CorralProxy

let tmp: string
let upstreams: Upstreams
let dbUrl: string
let dataDir: string
let token: string
let workspaceId: string
/** Every proxy started, so a failed test leaves no process behind. */
const started: ChildProcess[] = []
/** A worker process starts in 2–15 s on the shared 2-core machine; a test starts up to three. */
const SLOW = 120_000

function startProxy(workers: number): Promise<Proxy> {
  return startCorralProxy({ workers, dataDir, db: dbUrl, upstreamCa: join(tmp, 'upstream-ca/ca.pem'), started })
}

function children(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)
  } catch {
    return []
  }
}

const alive = (pid: number): boolean => existsSync(`/proc/${pid}`) && !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'))

async function until(what: string, ok: () => boolean, ms = 15_000): Promise<void> {
  const end = Date.now() + ms
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

/** `n` GETs on each of `connections` fresh connections; resolves with the statuses. */
async function traffic(proxy: Proxy, connections: number, n: number): Promise<number[]> {
  const statuses: number[] = []
  await Promise.all(Array.from({ length: connections }, async () => {
    const agent = new ProxyAgent({ uri: proxy.url, token: `Bearer ${token}`, requestTls: { ca: readFileSync(join(dataDir, 'ca.pem'), 'utf8') } })
    try {
      for (let i = 0; i < n; i++) {
        const r = await request(`https://127.0.0.1:${upstreams.httpsPort}/ping`, { dispatcher: agent })
        await r.body.text()
        statuses.push(r.statusCode)
      }
    } finally {
      await agent.close()
    }
  }))
  return statuses
}

/** Decision rows of the test's workspace (ids are the table's key: a row written twice would not add one). */
async function decisionRows(): Promise<{ id: string; decision: string }[]> {
  const store = await openStore(dbUrl)
  try {
    return await store.db.selectFrom('audit_events').select(['id', 'decision']).where('event_type', '=', 'policy_decision').where('workspace_id', '=', workspaceId).execute() as { id: string; decision: string }[]
  } finally {
    await store.close()
  }
}

async function stop(proxy: Proxy): Promise<number | null> {
  proxy.child.kill('SIGTERM')
  return proxy.exited
}

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'corral-proxy-workers-'))
  upstreams = await startUpstreams(tmp)
  dataDir = join(tmp, 'data')
  dbUrl = `sqlite:${join(tmp, 'corral.db')}`
  const store = await openStore(dbUrl)
  const org = (await store.orgs.create({ name: 'workers' }))!
  const t = proxyTables(store.db)
  const prov = await t.workspaces.createProvider(org.id, { name: 'none' })
  const role = await t.workspaces.createRole(org.id, { name: 'r', provider_id: prov, capabilities: onLoopback(CAPS, upstreams.httpsPort) })
  workspaceId = await t.workspaces.create(org.id, { role_id: role, created_by_user_id: 'usr_workers' })
  await loadMasterKey(dataDir).then((k) => new Sealer(k))
  token = (await new CapabilityTokens(await loadTokenKey(store.settings)).mint({ org_id: org.id, workspace_id: workspaceId }, 3600)).token
  await store.close()
})

afterAll(async () => {
  for (const c of started) {
    if (c.exitCode !== null || c.signalCode !== null) continue
    for (const pid of children(c.pid!)) process.kill(pid, 'SIGKILL')
    c.kill('SIGKILL')
  }
  await upstreams?.close()
  rmSync(tmp, { recursive: true, force: true })
})

describe('corral proxy --workers', () => {
  it('answers from N worker processes on one port; replaces a worker killed with SIGKILL; every answered request has exactly one row; SIGTERM exits 0', async () => {
    const before = (await decisionRows()).length
    const proxy = await startProxy(2)
    expect(proxy.out()).toMatch(/\(2 workers\)/)
    const workers = children(proxy.child.pid!)
    expect(workers).toHaveLength(2)
    expect(await traffic(proxy, 8, 5)).toEqual(Array(40).fill(200))
    const [victim, survivor] = workers
    process.kill(victim!, 'SIGKILL')
    await until('a replacement worker', () => {
      const now = children(proxy.child.pid!)
      return now.length === 2 && !now.includes(victim!)
    })
    // A connection reaching the replacement before it listens would be refused: wait for it.
    await until('the replacement to listen', () => proxy.out().includes('proxy worker replaced'))
    const replacement = children(proxy.child.pid!).find((p) => p !== survivor)!
    expect(await traffic(proxy, 8, 5)).toEqual(Array(40).fill(200))
    expect(await stop(proxy)).toBe(0)
    for (const pid of [survivor!, replacement]) expect(alive(pid)).toBe(false)
    // Every answered row is in the database after a restart (the guarantee: journaled before its
    // answer; the victim's replayed by its replacement, anything the database had not taken by the
    // stop's drain bound by this start).
    const again = await startProxy(1)
    expect(await stop(again)).toBe(0)
    const rows = await decisionRows()
    expect(rows.length - before, proxy.out()).toBe(80)
    expect(rows.every((r) => r.decision === 'allow')).toBe(true)
  }, SLOW)

  it('stops its workers when the primary is killed -9; a restart replays what they journaled', async () => {
    const before = (await decisionRows()).length
    const proxy = await startProxy(2)
    const workers = children(proxy.child.pid!)
    // The database takes no row until the workers are gone (a write lock held here), so every row
    // must come from the journals' replay — whatever the machine's load — and the restart below
    // starts while the orphaned workers may still be zombies that init has not reaped (seconds on
    // this machine): a journal whose writer exited is replayed, reaped or not (journal.ts isStale).
    const lock = new BetterSqlite3(dbUrl.slice('sqlite:'.length))
    lock.exec('BEGIN IMMEDIATE')
    try {
      expect(await traffic(proxy, 4, 5)).toEqual(Array(20).fill(200))
      proxy.child.kill('SIGKILL')
      await proxy.exited
      await until('the workers to exit', () => workers.every((pid) => !alive(pid)))
    } finally {
      lock.exec('ROLLBACK')
      lock.close()
    }
    const again = await startProxy(1)
    expect(await stop(again)).toBe(0)
    expect((await decisionRows()).length - before).toBe(20)
  }, SLOW)

  it('fails to start with a clear line and a non-zero exit when the workers cannot listen (no hang)', async () => {
    const taken = createServer()
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r))
    const port = (taken.address() as AddressInfo).port
    try {
      const r = await runCorral(['proxy', '--workers', '2', '--data-dir', dataDir, '--db', dbUrl, '--port', String(port)], { env: { CORRAL_LOG_LEVEL: 'warn' } })
      expect(r.code).toBe(1)
      expect(r.stderr).toMatch(/EADDRINUSE/)
      expect(r.stderr).toMatch(/proxy worker \d+ exited \(code 1\) before it listened/)
    } finally {
      await new Promise((r) => taken.close(r))
    }
  }, SLOW)
})
