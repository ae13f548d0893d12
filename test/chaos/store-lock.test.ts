// Another connection holds the database's write lock (on SQLite: a BEGIN IMMEDIATE from another
// process, as the provable log's append transaction, the audit bulk worker or an admin CLI would;
// on PostgreSQL: an exclusive lock on the budget ledgers) while the proxy (`serve`'s, then
// `corral proxy` on the same data dir and database) is asked for
// requests that make each kind of ledger write it does on the request path: a debit written behind
// (an unlimited counter) and a lease taken from the ledger (a ceiling's first request). The
// requests that do not need the ledger's answer must be answered while the lock is still held;
// the one that needs it is answered after the lock is released, and the ledgers hold every debit.
// The lock is released once those answers arrived, or after LOCK_BOUND_MS, which is below the
// store's own lock wait (5 s): a proxy whose event loop waits for the lock answers nothing before.
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { resolve } from 'node:path'
import { createInterface } from 'node:readline'
import pg from 'pg'
import { ProxyAgent, fetch as undiciFetch } from 'undici'
import { afterAll, describe, expect, it } from 'vitest'
import { startCorralProxy } from '../helpers/corral-proxy.js'
import { loopbackRule, seedWorkspace, startChaos, type Chaos } from './harness.js'
import { chaosDialects } from './dialects.js'

const LOCK_BOUND_MS = 4_000
const FREE_REQUESTS = 8

function caps(port: number): string {
  const rule = (path: string) => loopbackRule(port, path, ['GET'])
  return `- name: free
  type: http
  allow:
${rule('free')}- name: metered
  type: http
  allow:
${rule('metered')}  budgets:
    counters:
      - name: metered
        source: request.count
        workspace: { max: 0 }
- name: calls
  type: http
  allow:
${rule('calls')}  budgets:
    counters:
      - name: calls
        source: request.count
        workspace: { max: 1000 }
`
}

interface Lock { release(): Promise<void> }

/** SQLite: BEGIN IMMEDIATE in a child process (another connection, another process), held until release. */
async function sqliteLock(file: string): Promise<Lock> {
  const script = `const D = require('better-sqlite3'); const db = new D(process.argv[1]); db.pragma('busy_timeout = 10000');
db.exec('BEGIN IMMEDIATE'); console.log('LOCKED');
process.stdin.once('data', () => { db.exec('ROLLBACK'); db.close(); console.log('RELEASED'); process.exit(0) })`
  const child: ChildProcess = spawn(process.execPath, ['-e', script, file], { cwd: resolve(import.meta.dirname, '../..'), stdio: ['pipe', 'pipe', 'inherit'] })
  const lines = createInterface({ input: child.stdout! })
  const next = async (): Promise<string> => (await once(lines, 'line'))[0] as string
  expect(await next()).toBe('LOCKED')
  return {
    async release() {
      child.stdin!.write('release\n')
      expect(await next()).toBe('RELEASED')
      if (child.exitCode === null) await once(child, 'exit')
    },
  }
}

/** PostgreSQL: an exclusive lock on the budget ledgers in an open transaction of another connection. */
async function postgresLock(url: string): Promise<Lock> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  await client.query('BEGIN')
  await client.query('LOCK TABLE budget_ledgers IN ACCESS EXCLUSIVE MODE')
  return {
    async release() {
      await client.query('ROLLBACK')
      await client.end()
    },
  }
}

async function ledgerUsed(c: Chaos, workspaceId: string, capability: string): Promise<number> {
  return c.store(async (s) => {
    const db = s.db as unknown as import('kysely').Kysely<{ budget_ledgers: { key: string; used: number | string } }>
    const row = await db.selectFrom('budget_ledgers').select('used').where('key', '=', `${workspaceId}|ws|${capability}|${capability}`).executeTakeFirst()
    return Number(row?.used ?? 0)
  })
}

/**
 * Through the proxy at `proxyUrl`: the lock taken after a warm-up, a debit written behind, a
 * ceiling's first request, then requests needing no ledger; returns when the lock is released and
 * the ceiling's request answered. Asserts the order of answers and release.
 */
async function underTheLock(o: { proxyUrl: string; port: number; token: string; caPem: string; lock: () => Promise<Lock> }): Promise<void> {
  const agent = new ProxyAgent({ uri: o.proxyUrl, token: `Bearer ${o.token}`, requestTls: { ca: o.caPem } })
  let released = false
  const get = async (path: string): Promise<{ status: number; whileLocked: boolean }> => {
    const res = await undiciFetch(`https://127.0.0.1:${o.port}${path}`, { dispatcher: agent, signal: AbortSignal.timeout(30_000) })
    await res.arrayBuffer()
    return { status: res.status, whileLocked: !released }
  }
  try {
    // The workspace is active and its policy compiled before the lock is taken.
    expect((await get('/free/warm')).status).toBe(200)
    const lock = await o.lock()
    let releasing: Promise<void> | undefined
    // An answer counts as early only if it came before the release was even asked for.
    const releaseOnce = (): Promise<void> => {
      released = true
      return (releasing ??= lock.release())
    }
    const bound = setTimeout(() => void releaseOnce(), LOCK_BOUND_MS)
    // A debit written behind (the proxy writes it to the ledger on its own schedule).
    const metered = await get('/metered/1')
    // A ceiling's first request: its lease must come from the ledger before it is forwarded.
    const calls = get('/calls/1')
    // Requests that need no ledger, one after another, while both writes wait for the lock.
    const free: Array<{ status: number; whileLocked: boolean }> = []
    for (let i = 0; i < FREE_REQUESTS && !released; i++) free.push(await get(`/free/${i}`))
    clearTimeout(bound)
    await releaseOnce()
    const leased = await calls

    expect(metered).toEqual({ status: 200, whileLocked: true })
    expect(free).toEqual(Array.from({ length: FREE_REQUESTS }, () => ({ status: 200, whileLocked: true })))
    expect(leased).toEqual({ status: 200, whileLocked: false })
  } finally {
    await agent.close()
  }
}

for (const d of chaosDialects('chaos/store-lock.test.ts')) {
  describe(`the proxy while another connection holds the database's write lock [${d.name}]`, () => {
    let c: Chaos | undefined
    const started: ChildProcess[] = []
    afterAll(async () => {
      for (const p of started) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL')
      await c?.close()
      await d.drop()
    })
    const lockOf = (chaos: Chaos) => (): Promise<Lock> => (d.name === 'sqlite' ? sqliteLock(chaos.db.slice('sqlite:'.length)) : postgresLock(chaos.db))

    it('serve: answers every request that does not need the ledger before the lock is released; the ledger gets every write after', async () => {
      const db = await d.create()
      c = await startChaos(db ? { db } : {})
      const ws = await seedWorkspace(c, caps(c.upstream.port))
      await underTheLock({ proxyUrl: c.proxyUrl, port: c.upstream.port, token: ws.token, caPem: ws.caPem, lock: lockOf(c) })
      // Every write reached the ledger once the lock was gone: the debit written behind, and the lease.
      await c.serve.stop({ keepDataDir: true })
      expect(await ledgerUsed(c, ws.workspaceId, 'metered')).toBe(1)
      expect(await ledgerUsed(c, ws.workspaceId, 'calls')).toBe(1)
    })

    it('corral proxy: the same, on the same data dir and database with serve stopped', async () => {
      const chaos = c!
      const ws = await seedWorkspace(chaos, caps(chaos.upstream.port))
      const proxy = await startCorralProxy({ workers: 1, dataDir: chaos.dataDir, db: chaos.db, upstreamCa: chaos.upstream.caFile, started })
      await underTheLock({ proxyUrl: proxy.url, port: chaos.upstream.port, token: ws.token, caPem: ws.caPem, lock: lockOf(chaos) })
      proxy.child.kill('SIGTERM')
      expect(await proxy.exited).toBe(0)
      expect(await ledgerUsed(chaos, ws.workspaceId, 'metered')).toBe(1)
      expect(await ledgerUsed(chaos, ws.workspaceId, 'calls')).toBe(1)
    })
  })
}
