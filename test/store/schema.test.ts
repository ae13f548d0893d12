import { randomBytes } from 'node:crypto'
import { sql } from 'kysely'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { v7 as uuidv7 } from 'uuid'
import { openStore } from '../../src/store/index.js'
import { migrations } from '../../src/store/migrations/index.js'
import { openSibling, pgTestUrl, testDialects } from '../helpers/dialects.js'

const event = (org: string) => ({
  id: uuidv7(), org_id: org, user_id: 'system', timestamp: new Date().toISOString(),
  event_type: 'api_key_created' as const, category: 'audit' as const, actor: 'control-plane' as const, detail: { resource_id: 'key_1' },
})

for (const d of testDialects()) {
  describe(`store schema [${d.name}]`, () => {
    it('the audit table refuses UPDATE and DELETE in the database itself', async () => {
      const store = await d.open()
      const e = event('org_a')
      await store.audit.insertBatch([e])
      await expect(sql`UPDATE audit_events SET user_id = 'forged'`.execute(store.db)).rejects.toThrow(/append-only/)
      await expect(sql`DELETE FROM audit_events`.execute(store.db)).rejects.toThrow(/append-only/)
      await expect(store.db.updateTable('audit_events').set({ decision: 'allow' }).where('id', '=', e.id).execute()).rejects.toThrow(/append-only/)
      if (d.name === 'postgres') await expect(sql`TRUNCATE audit_events`.execute(store.db)).rejects.toThrow(/append-only/)
      expect(await store.audit.getById('org_a', e.id)).toMatchObject({ user_id: 'system' })
      await store.close()
    })

    it('reopening runs no migration twice and keeps data', async () => {
      const store = await d.open()
      await store.settings.set('marker', 'kept')
      const again = await openSibling(store)
      expect(await again.settings.get('marker')).toBe('kept')
      const applied = await sql<{ name: string }>`SELECT name FROM kysely_migration ORDER BY name`.execute(again.db)
      expect(applied.rows.map((r) => r.name)).toEqual(migrations.map((m) => m.name).sort())
      await again.close()
      await store.close()
    })

    if (d.name === 'postgres') {
      it('replicas migrating one fresh schema at once apply each migration exactly once', async () => {
        const url = pgTestUrl()!
        const schema = `t_mig_${randomBytes(5).toString('hex')}`
        const stores = await Promise.all([1, 2, 3].map(() => openStore(url, { schema, poolSize: 2 })))
        try {
          const applied = await sql<{ n: number }>`SELECT count(*)::int AS n FROM kysely_migration`.execute(stores[0].db)
          expect(applied.rows[0].n).toBe(migrations.length)
        } finally {
          await Promise.all(stores.map((s) => s.close()))
          const c = new pg.Client({ connectionString: url })
          await c.connect()
          await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
          await c.end()
        }
      })

      it('a store opens while other stores of the database drop their schemas (the migration scan looks across schemas)', async () => {
        const url = pgTestUrl()!
        const tag = randomBytes(4).toString('hex')
        const churn = new pg.Client({ connectionString: url })
        await churn.connect()
        let stop = false
        const dropping = (async () => {
          for (let i = 0; !stop; i++) {
            const other = `t_churn_${tag}_${i}`
            await churn.query(`CREATE SCHEMA "${other}"; CREATE TABLE "${other}".t (id int)`)
            await churn.query(`DROP SCHEMA "${other}" CASCADE`)
          }
        })()
        const opened: string[] = []
        try {
          for (let i = 0; i < 12; i++) {
            const schema = `t_race_${tag}_${i}`
            opened.push(schema)
            const store = await openStore(url, { schema, poolSize: 2 })
            await store.close()
          }
        } finally {
          stop = true
          await dropping
          for (const schema of opened) await churn.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
          await churn.end()
        }
      })
    }
  })
}
