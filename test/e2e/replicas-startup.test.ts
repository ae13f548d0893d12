// The start-up rule for several `corral serve` replicas on one PostgreSQL database
// (src/serve/replica.ts, docs/reliability.md "Replicas"): without a registry for snapshots and
// packs a second replica refuses to start with one line; a replica registers itself with a
// heartbeat and deregisters on a clean stop; the advisory lock is taken again after its connection
// is killed (pg_terminate_backend), and a replica whose lock was taken by another meanwhile stops
// serving with one error line and exit 1. Runs when CORRAL_TEST_PG_URL is set.
import { appendFileSync, mkdirSync } from 'node:fs'
import { join, resolve } from 'node:path'
import pg from 'pg'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describePostgres } from '../helpers/dialects.js'
import { createTestDatabase, startServe, type RunningServe } from '../helpers/serve.js'

describePostgres('corral serve replicas: start-up rule', (baseUrl) => {
  let db: Awaited<ReturnType<typeof createTestDatabase>>
  let a: RunningServe | undefined
  const replicas = async (): Promise<Array<{ id: string; api_url: string | null }>> => {
    const client = new pg.Client({ connectionString: db.url })
    await client.connect()
    try {
      return (await client.query<{ id: string; api_url: string | null }>('SELECT id, api_url FROM replicas WHERE expires_at > $1', [Date.now()])).rows
    } finally {
      await client.end()
    }
  }

  beforeAll(async () => {
    db = await createTestDatabase(baseUrl)
    const results = resolve(import.meta.dirname, '../../test-results')
    mkdirSync(results, { recursive: true })
    appendFileSync(join(results, 'pg-suites-ran'), 'replicas-startup.test.ts\n')
  })
  afterAll(async () => {
    await a?.stop()
    await db?.drop()
  })

  it('a second replica without a registry refuses to start with one line; a clean stop deregisters', async () => {
    a = await startServe({ db: db.url, args: ['--runtime', 'process'] })
    expect(await replicas()).toEqual([{ id: expect.stringMatching(/^rep_[0-9a-f]{16}$/), api_url: a.url }])
    const refused = await startServe({ db: db.url, args: ['--runtime', 'process'] }).then(
      (s) => ({ started: s }), (err: Error) => ({ error: err.message }),
    )
    if ('started' in refused) await refused.started.stop()
    expect(refused).toHaveProperty('error')
    const lines = (refused as { error: string }).error.split('\n').slice(1).filter((l) => l.trim() && !l.includes('WARNING'))
    expect(lines).toEqual(['Error: another corral serve already runs on this database: several replicas need shared snapshots and packs, so set CORRAL_PACK_REGISTRY (the same registry) on every replica'])
    // A replica with a registry is refused too while one without runs.
    const withRegistry = await startServe({ db: db.url, args: ['--runtime', 'process'], env: { CORRAL_PACK_REGISTRY: '127.0.0.1:5999/corral' } }).then(
      (s) => ({ started: s }), (err: Error) => ({ error: err.message }),
    )
    if ('started' in withRegistry) await withRegistry.started.stop()
    expect((withRegistry as { error: string }).error).toContain('another corral serve runs on this database with snapshots and packs on its local disk')
    expect(await a.stop()).toBe(0)
    a = undefined
    expect(await replicas()).toEqual([])
  }, 60_000)

  /** Backends holding the replicas advisory lock (application_name `corral-replica-lock`) on the test database. */
  const lockHolders = async (): Promise<number[]> => {
    const client = new pg.Client({ connectionString: db.url })
    await client.connect()
    try {
      const r = await client.query<{ pid: number }>(
        `SELECT a.pid FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid AND l.locktype = 'advisory' AND l.granted
         WHERE a.application_name = 'corral-replica-lock' AND a.datname = current_database()`)
      return r.rows.map((x) => x.pid)
    } finally {
      await client.end()
    }
  }
  const waitFor = async <T>(probe: () => Promise<T | false>, what: string): Promise<T> => {
    for (let i = 0; i < 200; i++) {
      const v = await probe()
      if (v !== false) return v
      await new Promise((r) => setTimeout(r, 100))
    }
    throw new Error(`timed out waiting for ${what}`)
  }

  it('the advisory lock is taken again after pg_terminate_backend; a replica whose lock was taken meanwhile stops loudly', async () => {
    a = await startServe({ db: db.url, args: ['--runtime', 'process'] })
    const [first] = await waitFor(async () => { const p = await lockHolders(); return p.length === 1 && p }, 'the lock holder')
    const admin = new pg.Client({ connectionString: db.url })
    await admin.connect()
    try {
      await admin.query('SELECT pg_terminate_backend($1)', [first])
      const [again] = await waitFor(async () => { const p = await lockHolders(); return p.length === 1 && p[0] !== first && p }, 'the lock taken again')
      expect(again).not.toBe(first)
      expect(a.output()).toContain('taking the lock again')
      // The rule still holds after the re-take: a second replica without a registry is refused.
      const refused = await startServe({ db: db.url, args: ['--runtime', 'process'] }).then(async (s) => { await s.stop(); return '' }, (err: Error) => err.message)
      expect(refused).toContain('another corral serve already runs on this database')

      // Kill the lock's connection again and take the lock from here before A can (another replica
      // without a registry, in effect): A stops serving with one error line and exit 1.
      // (pg_terminate_backend only signals: the lock is waited for, bounded, queued before A's retry.)
      await admin.query('SELECT pg_terminate_backend($1)', [again])
      await admin.query("SET lock_timeout = '10s'")
      await admin.query('SELECT pg_advisory_lock(hashtext($1))', ['corral_replicas'])
      const code = await waitFor(async () => (a!.process.exitCode ?? false), 'A to exit')
      expect(code).toBe(1)
      expect(a.output()).toContain('this replica lost its start-up lock and another replica took it meanwhile')
      await a.stop()
      a = undefined
    } finally {
      await admin.end()
    }
  }, 60_000)

  it('a replica whose master key cannot open the sealed secrets refuses to start with one line; the same key starts', async () => {
    // A database of its own: the first serve on it bootstraps and holds the owner key.
    const own = await createTestDatabase(baseUrl)
    const env = { CORRAL_PACK_REGISTRY: '127.0.0.1:5999/corral', CORRAL_MASTER_KEY: 'c3'.repeat(32) }
    try {
      await masterKeyCase(own.url, env)
    } finally {
      await a?.stop()
      a = undefined
      await own.drop()
    }
  }, 90_000)

  const masterKeyCase = async (url: string, env: Record<string, string>) => {
    a = await startServe({ db: url, args: ['--runtime', 'process'], env })
    const put = await fetch(`${a.url}/v1/secrets`, {
      method: 'POST', headers: { authorization: `Bearer ${a.adminKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'sealed', value: 'v' }),
    })
    expect(put.status).toBe(201)
    const refused = await startServe({ db: url, args: ['--runtime', 'process'], env: { ...env, CORRAL_MASTER_KEY: 'd4'.repeat(32) } }).then(
      async (s) => { await s.stop(); return '' }, (err: Error) => err.message,
    )
    const lines = refused.split('\n').slice(1).filter((l) => l.trim() && !l.includes('WARNING'))
    expect(lines).toEqual(['Error: this process\'s master key (CORRAL_MASTER_KEY, else <data-dir>/master.key) cannot open the secrets and credentials sealed in this database: every replica (serve and corral proxy) needs the same CORRAL_MASTER_KEY'])
    // The same key starts (it printed its ready line; how it stops is not this test's business).
    const same = await startServe({ db: url, args: ['--runtime', 'process'], env })
    expect(same.output()).toContain('corral ready: api')
    await same.stop()
    expect(await a.stop()).toBe(0)
    a = undefined
  }

  it('--lease-ttl out of range refuses the start, naming the flag', async () => {
    const refused = await startServe({ db: db.url, args: ['--runtime', 'process', '--lease-ttl', '0.1'] }).then(() => '', (err: Error) => err.message)
    expect(refused).toContain('--lease-ttl (CORRAL_LEASE_TTL) must be a number of seconds from 0.5 to 300, got "0.1"')
  })
})
