// Three `corral serve` replicas started at the same moment on a fresh PostgreSQL database (a
// Deployment rolled out with replicas: 3): migrations run exactly once under the migrator's
// advisory lock, every replica comes up on the migrated schema, and exactly one bootstraps the
// owner key (docs/kubernetes.md "Upgrade"). Runs when CORRAL_TEST_PG_URL is set (CI always sets it).
import { appendFileSync, mkdirSync } from 'node:fs'
import { join, resolve } from 'node:path'
import pg from 'pg'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { migrations } from '../../src/store/migrations/index.js'
import { describePostgres } from '../helpers/dialects.js'
import { createTestDatabase, startServe, type RunningServe } from '../helpers/serve.js'

describePostgres('three serve replicas starting together on a fresh database', (baseUrl) => {
  let db: Awaited<ReturnType<typeof createTestDatabase>>
  let replicas: RunningServe[] = []

  beforeAll(async () => {
    db = await createTestDatabase(baseUrl)
    const results = resolve(import.meta.dirname, '../../test-results')
    mkdirSync(results, { recursive: true })
    appendFileSync(join(results, 'pg-suites-ran'), 'serve-start-together.test.ts\n')
    // Several replicas need shared snapshots and packs (docs/reliability.md "Replicas"): a registry
    // setting (nothing here pushes or pulls), else the second and third refuse to start.
    const env = { CORRAL_PACK_REGISTRY: '127.0.0.1:5999/corral' }
    const started = await Promise.allSettled([0, 1, 2].map(() => startServe({ db: db.url, timeoutMs: 60_000, env })))
    replicas = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []))
    const failed = started.flatMap((s) => (s.status === 'rejected' ? [String(s.reason)] : []))
    expect(failed).toEqual([])
  }, 90_000)

  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.stop()))
    await db?.drop()
  })

  it('applied every migration exactly once', async () => {
    const client = new pg.Client({ connectionString: db.url })
    await client.connect()
    try {
      const { rows } = await client.query<{ name: string }>('SELECT name FROM kysely_migration ORDER BY name')
      expect(rows.map((r) => r.name)).toEqual(migrations.map((m) => m.name).sort())
    } finally {
      await client.end()
    }
  })

  it('every replica answers on the migrated schema; exactly one minted the owner key', async () => {
    const keys = replicas.map((r) => r.adminKey).filter(Boolean)
    expect(keys).toHaveLength(1)
    for (const r of replicas) {
      expect((await fetch(`${r.url}/healthz`)).status).toBe(200)
      expect((await fetch(`${r.url}/v1/me`, { headers: { authorization: `Bearer ${keys[0]}` } })).status).toBe(200)
    }
  })
})
