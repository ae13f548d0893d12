// Several `corral serve` replicas on one Postgres database: one bootstraps, every replica sees
// every event on its live stream (LISTEN/NOTIFY), and a key revoked on one is refused by the others.
// Runs when CORRAL_TEST_PG_URL is set (CI always sets it), on a database created for this file.
import { appendFileSync, existsSync, mkdirSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describePostgres } from '../helpers/dialects.js'
import { createTestDatabase, startServe, type RunningServe } from '../helpers/serve.js'

describePostgres('corral serve replicas on one Postgres database', (baseUrl) => {
  let db: Awaited<ReturnType<typeof createTestDatabase>>
  let a: RunningServe
  let b: RunningServe
  let adminKey: string

  beforeAll(async () => {
    db = await createTestDatabase(baseUrl)
    const results = resolve(import.meta.dirname, '../../test-results')
    mkdirSync(results, { recursive: true })
    appendFileSync(join(results, 'pg-suites-ran'), 'serve-postgres.test.ts\n')
    // Started together: they race to migrate and bootstrap; exactly one mints the owner key.
    // Several replicas need shared snapshots and packs (a registry; docs/reliability.md "Replicas"):
    // the setting is only read here (nothing in this file pushes or pulls).
    const env = { CORRAL_PACK_REGISTRY: '127.0.0.1:5999/corral' }
    ;[a, b] = await Promise.all([startServe({ db: db.url, env }), startServe({ db: db.url, env })])
    const keys = [a, b].map((s) => s.adminKey).filter(Boolean)
    expect(keys).toHaveLength(1)
    adminKey = keys[0]
  }, 60_000)

  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()])
    await db?.drop()
  })

  it('bootstrapped exactly once, and both replicas authenticate the key', async () => {
    expect([a, b].filter((s) => existsSync(join(s.dataDir, 'admin.key')))).toHaveLength(1)
    for (const s of [a, b]) expect((await fetch(`${s.url}/v1/me`, { headers: { authorization: `Bearer ${adminKey}` } })).status).toBe(200)
  })

  it('an event written through one replica reaches a live stream on the other', async () => {
    const stream = await fetch(`${b.url}/v1/activity/stream?filter=event_type=api_key_created`, { headers: { authorization: `Bearer ${adminKey}` } })
    expect(stream.status).toBe(200)
    const created = await fetch(`${a.url}/v1/api-keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ label: 'seen everywhere', permission_set: 'read_only' }),
    }).then((r) => r.json() as Promise<{ id: string; value: string }>)
    const reader = stream.body!.getReader()
    let text = ''
    while (!text.includes(created.id)) {
      const { value, done } = await reader.read()
      if (done) break
      text += new TextDecoder().decode(value)
    }
    await reader.cancel()
    expect(text).toContain('event: activity')
    expect(text).toContain(created.id)
    expect(text).not.toContain(created.value)
  })

  it('a key revoked on one replica is refused by the other at once', async () => {
    const created = await fetch(`${a.url}/v1/api-keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ label: 'revoke me', permission_set: 'read_only' }),
    }).then((r) => r.json() as Promise<{ id: string; value: string }>)
    const me = () => fetch(`${b.url}/v1/me`, { headers: { authorization: `Bearer ${created.value}` } }).then((r) => r.status)
    expect(await me()).toBe(200) // cached on b
    expect((await fetch(`${a.url}/v1/api-keys/${created.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${adminKey}` } })).status).toBe(200)
    let status = await me()
    // NOTIFY crosses processes asynchronously; give it a bounded moment.
    for (let i = 0; i < 50 && status !== 401; i++) {
      await new Promise((r) => setTimeout(r, 20))
      status = await me()
    }
    expect(status).toBe(401)
  })
})
