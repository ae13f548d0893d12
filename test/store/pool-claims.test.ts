// A warm-pool claim takes a ready member even while another writer (a reconcile, a warm-up) holds
// that member's row (src/store/repositories/workspace-pools.ts claimPooled; docs/workspaces.md
// "Warm pools across replicas"): on PostgreSQL the claim's SKIP LOCKED once skipped such a member
// and the task's create made a new workspace beside the warm one. Parallel claims still get
// distinct members, and a claim of an empty pool is undefined (both dialects).
import { randomBytes } from 'node:crypto'
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import type { Store } from '../../src/store/index.js'
import { proxyTables } from '../../src/store/proxy-tables.js'
import { openSibling, testDialects } from '../helpers/dialects.js'

const OWNER = { created_by: 'usr_claim', created_by_user_id: 'usr_claim' }

async function pool(store: Store, size: number): Promise<{ orgId: string; roleId: string; members: string[] }> {
  const org = (await store.orgs.create({ name: `org-${randomBytes(4).toString('hex')}` }))!
  const t = proxyTables(store.db)
  const providerId = await t.workspaces.createProvider(org.id, { name: 'anthropic' })
  const roleId = await t.workspaces.createRole(org.id, { name: 'pooled', provider_id: providerId })
  const members: string[] = []
  for (let i = 0; i < size; i++) {
    const id = await store.workspaces.create(org.id, { role_id: roleId, created_by: 'system', created_by_user_id: 'system', pooled: true })
    expect(await store.workspaces.transition(id, ['provisioning'], 'idle')).toBe(true)
    members.push(id)
  }
  return { orgId: org.id, roleId, members }
}

for (const d of testDialects()) {
  describe(`warm-pool claims [${d.name}]`, () => {
    // Row locks are PostgreSQL's: SQLite has one writer at a time, and its claim never skips a member.
    if (d.name === 'postgres') it('a member whose row another writer holds is waited for and claimed, not skipped', async () => {
      const store = await d.open()
      const other = await openSibling(store)
      const { orgId, roleId, members } = await pool(store, 1)
      let release!: () => void
      const held = new Promise<void>((r) => (release = r))
      let locked!: () => void
      const isLocked = new Promise<void>((r) => (locked = r))
      // Another writer updates the member (as a reconcile does) and keeps its transaction open.
      const writer = other.db.transaction().execute(async (trx) => {
        await sql`UPDATE workspaces SET updated_at = ${new Date().toISOString()} WHERE id = ${members[0]}`.execute(trx)
        locked()
        await held
      })
      await isLocked
      const claim = store.workspaces.claimPooled(orgId, roleId, OWNER)
      // Commit once the claim waits on the row (or after a bound, where the old claim had skipped it).
      for (let i = 0; i < 100; i++) {
        const waiting = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted`.execute(other.db)
        if (waiting.rows[0]!.n > 0) break
        await new Promise((r) => setTimeout(r, 50))
      }
      release()
      await writer
      expect(await claim).toBe(members[0])
      expect(await store.workspaces.claimPooled(orgId, roleId, OWNER)).toBeUndefined()
    })

    it('parallel claims get distinct members, as many as there are', async () => {
      const store = await d.open()
      const { orgId, roleId, members } = await pool(store, 3)
      const claims = await Promise.all(Array.from({ length: 4 }, () => store.workspaces.claimPooled(orgId, roleId, OWNER)))
      expect(claims.filter(Boolean).sort()).toEqual([...members].sort())
      expect(claims.filter((c) => c === undefined)).toHaveLength(1)
    })
  })
}
