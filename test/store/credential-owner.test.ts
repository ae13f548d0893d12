// Personal credentials in the store (migration 20261126T071000-creds-credential-owner): the two
// uniqueness rules, the choice rule the broker reads through `material`, reaping, and — SQLite,
// where the migration rebuilds the table — that an existing store keeps its rows and indexes.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import SQLite from 'better-sqlite3'
import { Kysely, Migrator, SqliteDialect, sql, type Migration } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { isUniqueViolation, openStore, type Store } from '../../src/store/index.js'
import { migrations } from '../../src/store/migrations/index.js'
import { testDialects } from '../helpers/dialects.js'

const OWNER_MIGRATION = '20261126T071000-creds-credential-owner'

for (const d of testDialects()) {
  describe(`personal credentials in the store [${d.name}]`, () => {
    let store: Store
    beforeAll(async () => {
      store = await d.open()
    })
    afterAll(async () => {
      await store.close()
    })
    const newOrg = async () => (await store.orgs.create({ name: `org-${Math.random().toString(36).slice(2)}` }))!.id
    const cred = (name: string, owner?: string) => ({ name, provider: 'github', kind: 'static_token', ciphertext: `v1.${name}.${owner ?? 'org'}`, ...(owner ? { owner_user_id: owner } : {}) })

    it('keeps names unique among the org credentials and among each member’s own, not across them', async () => {
      const org = await newOrg()
      const c = store.proxy.credentials
      await c.create(org, cred('github'))
      await c.create(org, cred('github', 'usr_a'))
      await c.create(org, cred('github', 'usr_b'))
      const dupOrg = await c.create(org, cred('github')).catch((e: unknown) => e)
      const dupMine = await c.create(org, cred('github', 'usr_a')).catch((e: unknown) => e)
      expect(isUniqueViolation(dupOrg)).toBe(true)
      expect(isUniqueViolation(dupMine)).toBe(true)
      expect(await c.exists(org, 'github', null)).toBe(true)
      expect(await c.exists(org, 'github', 'usr_a')).toBe(true)
      expect(await c.exists(org, 'github', 'usr_c')).toBe(false)
      const all = await c.list(org)
      expect(all.map((m) => [m.name, m.owner_user_id ?? null])).toEqual([['github', null], ['github', 'usr_a'], ['github', 'usr_b']])
      expect((await c.list(org, { owner: 'usr_b' })).map((m) => m.owner_user_id)).toEqual(['usr_b'])
    })

    it('material: the owner’s personal credential wins over the org’s; without an owner only the org’s', async () => {
      const org = await newOrg()
      const c = store.proxy.credentials
      await c.create(org, cred('gh'))
      await c.create(org, cred('gh', 'usr_a'))
      await c.create(org, cred('only-mine', 'usr_a'))
      expect((await c.material(org, 'gh', 'usr_a'))?.ciphertext).toBe('v1.gh.usr_a')
      expect((await c.material(org, 'gh', 'usr_b'))?.ciphertext).toBe('v1.gh.org')
      expect((await c.material(org, 'gh'))?.ciphertext).toBe('v1.gh.org')
      expect(await c.material(org, 'only-mine', 'usr_b')).toBeUndefined()
      expect(await c.material(org, 'only-mine')).toBeUndefined()
      expect((await c.material(org, 'only-mine', 'usr_a'))?.owner_user_id).toBe('usr_a')
    })

    it('reap deletes one member’s personal credentials in one org, nothing else', async () => {
      const org = await newOrg()
      const other = await newOrg()
      const c = store.proxy.credentials
      await c.create(org, cred('gh'))
      await c.create(org, cred('gh', 'usr_a'))
      await c.create(org, cred('npm', 'usr_a'))
      await c.create(org, cred('gh', 'usr_b'))
      await c.create(other, cred('gh', 'usr_a'))
      const reaped = await store.transaction((tx) => tx.proxy.credentials.reap(org, 'usr_a'))
      expect(reaped.map((m) => [m.name, m.owner_user_id])).toEqual([['gh', 'usr_a'], ['npm', 'usr_a']])
      expect((await c.list(org)).map((m) => m.owner_user_id ?? null).sort()).toEqual(['usr_b', null].sort())
      expect(await c.list(other)).toHaveLength(1)
      expect(await c.reap(org, 'usr_a')).toEqual([])
    })
  })
}

describe('the credential-owner migration on an existing SQLite store', () => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-cred-owner-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('keeps every row and index of the credentials table through the rebuild', async () => {
    const file = join(dir, 'corral.db')
    const raw = new SQLite(file)
    raw.pragma('foreign_keys = ON')
    const db = new Kysely<any>({ dialect: new SqliteDialect({ database: raw }) })
    const before = migrations.filter((m) => m.name < OWNER_MIGRATION)
    const provider = { getMigrations: async (): Promise<Record<string, Migration>> => Object.fromEntries(before.map((m) => [m.name, { up: (k: Kysely<any>) => m.up(k, 'sqlite') }])) }
    const res = await new Migrator({ db, provider, allowUnorderedMigrations: true }).migrateToLatest()
    expect(res.error).toBeUndefined()
    await db.insertInto('orgs').values({ id: 'org_x', name: 'x', created_at: '2026-01-01T00:00:00.000Z' }).execute()
    await db.insertInto('credentials').values({
      id: 'cred_1', org_id: 'org_x', name: 'github', provider: 'github', kind: 'static_token', status: 'active', ciphertext: 'v1.sealed',
      created_by_user_id: 'usr_1', created_at: '2026-01-01T00:00:00.000Z', updated_at: '2026-01-01T00:00:00.000Z',
    }).execute()
    await sql`CREATE INDEX credentials_provider_test_idx ON credentials (provider)`.execute(db)
    await db.destroy()

    const store = await openStore(`sqlite:${file}`)
    try {
      const [meta] = await store.proxy.credentials.list('org_x')
      expect(meta).toEqual({
        id: 'cred_1', name: 'github', provider: 'github', kind: 'static_token', status: 'active', created_by_user_id: 'usr_1',
        created_at: '2026-01-01T00:00:00.000Z', updated_at: '2026-01-01T00:00:00.000Z',
      })
      expect((await store.proxy.credentials.material('org_x', 'github'))?.ciphertext).toBe('v1.sealed')
      const idx = await sql<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'credentials' ORDER BY name`.execute(store.db)
      expect(idx.rows.map((r) => r.name)).toEqual(expect.arrayContaining(['credentials_org_name_uq', 'credentials_owner_name_uq', 'credentials_provider_test_idx']))
      const fk = await sql<{ foreign_keys: number }>`PRAGMA foreign_keys`.execute(store.db)
      expect(fk.rows[0]?.foreign_keys).toBe(1)
      await store.proxy.credentials.create('org_x', { name: 'github', provider: 'github', kind: 'static_token', ciphertext: 'v1.mine', owner_user_id: 'usr_1' })
      expect((await store.proxy.credentials.material('org_x', 'github', 'usr_1'))?.ciphertext).toBe('v1.mine')
    } finally {
      await store.close()
    }
  })
})
