// The audit log is append-only in the database itself, against every write verb (issue 14 §2).
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createAuditWriter } from '../../src/audit/index.js'
import type { Store } from '../../src/store/index.js'
import { decision, orgId } from '../audit/fixtures.js'
import { testDialects } from '../helpers/dialects.js'

for (const d of testDialects()) {
  describe(`audit log is append-only [${d.name}]`, () => {
    let store: Store
    let id: string
    let org: string
    beforeAll(async () => {
      store = await d.open()
      org = orgId()
      const writer = createAuditWriter(store)
      id = (await writer.emit(decision(org, { decision: 'deny', reason: 'no_match' }))).id
      await store.audit.quarantine([{ id, org_id: org, reason: 'test', text: '{}' }])
      await writer.close()
    })
    afterAll(async () => {
      await store.close()
    })

    const stored = async () => {
      const row = await store.db.selectFrom('audit_events').select(['decision', 'reason', 'org_id']).where('id', '=', id).executeTakeFirst()
      const n = await store.db.selectFrom('audit_events').select((eb) => eb.fn.countAll().as('n')).where('id', '=', id).executeTakeFirst()
      return { ...row, n: Number(n?.n) }
    }
    const unchanged = { decision: 'deny', reason: 'no_match', n: 1 }
    const pg = d.name === 'postgres'

    const attempts: Array<[string, () => string]> = [
      ['UPDATE', () => `UPDATE audit_events SET decision = 'allow', reason = NULL WHERE id = '${id}'`],
      ['DELETE', () => `DELETE FROM audit_events WHERE id = '${id}'`],
      ['ON CONFLICT DO UPDATE', () =>
        `INSERT INTO audit_events (id, org_id, user_id, timestamp, ts, event_type, category, actor, decision)
         VALUES ('${id}', '${org}', 'u', '2026-01-01T00:00:00.000Z', 0, 'policy_decision', 'audit', 'policy-engine', 'allow')
         ON CONFLICT (id) DO UPDATE SET decision = 'allow', reason = NULL`],
      ...(pg
        ? ([
            ['TRUNCATE', () => 'TRUNCATE audit_events'],
            ['MERGE', () => `MERGE INTO audit_events a USING (SELECT '${id}'::uuid AS id) s ON a.id = s.id WHEN MATCHED THEN UPDATE SET decision = 'allow'`],
          ] as Array<[string, () => string]>)
        : ([
            ['INSERT OR REPLACE', () =>
              `INSERT OR REPLACE INTO audit_events (id, org_id, user_id, timestamp, ts, event_type, category, actor, decision)
               VALUES ('${id}', '${org}', 'u', '2026-01-01T00:00:00.000Z', 0, 'policy_decision', 'audit', 'policy-engine', 'allow')`],
            ['REPLACE', () =>
              `REPLACE INTO audit_events (id, org_id, user_id, timestamp, ts, event_type, category, actor, decision)
               VALUES ('${id}', '${org}', 'u', '2026-01-01T00:00:00.000Z', 0, 'policy_decision', 'audit', 'policy-engine', 'allow')`],
            ['UPDATE OR REPLACE', () => `UPDATE OR REPLACE audit_events SET decision = 'allow' WHERE id = '${id}'`],
          ] as Array<[string, () => string]>)),
    ]

    for (const [verb, statement] of attempts) {
      it(`${verb} changes nothing`, async () => {
        // Refused with an error (UPDATE, DELETE, TRUNCATE, upsert on Postgres) or silently ignored
        // (SQLite: REPLACE and upserts find no conflict left); either way the row stands.
        await sql.raw(statement()).execute(store.db).catch(() => {})
        expect(await stored()).toEqual({ ...unchanged, org_id: org })
      })
    }

    it('UPDATE and DELETE are refused with an error, not ignored', async () => {
      await expect(sql.raw(`UPDATE audit_events SET decision = 'allow' WHERE id = '${id}'`).execute(store.db)).rejects.toThrow(/append-only/)
      await expect(sql.raw(`DELETE FROM audit_events WHERE id = '${id}'`).execute(store.db)).rejects.toThrow(/append-only/)
    })

    it('a plain insert of a stored id is ignored (insert-or-ignore semantics stay)', async () => {
      const again = decision(org, { decision: 'allow' })
      const rows = await store.audit.insertBatchReturningIds([{ ...again, id, timestamp: '2026-01-01T00:00:00.000Z' } as never])
      expect(rows).toEqual([])
      expect(await stored()).toEqual({ ...unchanged, org_id: org })
    })

    it('the quarantine is append-only too', async () => {
      for (const s of [`UPDATE audit_quarantine SET reason = 'x'`, `DELETE FROM audit_quarantine`, ...(pg ? ['TRUNCATE audit_quarantine'] : [])]) {
        await expect(sql.raw(s).execute(store.db)).rejects.toThrow(/append-only/)
      }
      if (!pg) await sql.raw(`INSERT OR REPLACE INTO audit_quarantine (id, reason, event, quarantined_at, ts) VALUES ('${id}', 'x', 'x', 'x', 0)`).execute(store.db)
      const [q] = await store.db.selectFrom('audit_quarantine').select('reason').where('id', '=', id).execute()
      expect(q.reason).toBe('test')
    })
  })
}
