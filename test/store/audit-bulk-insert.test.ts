// The audit log's bulk insert (the writer's batches, and insertBatchReturningIds outside a
// transaction): every new row is stored and queued once for the provable log and the export order
// by the triggers in the same transaction, a repeated id is skipped everywhere, and a row a
// constraint refuses fails the whole batch with that constraint's own error, so the writer bisects
// it down to the one event and quarantines it. On SQLite the insert ignores conflicts first (it
// then needs no statement journal) and retries a skipped row strictly: these tests hold that a
// refused row is never silently dropped by it, on the worker thread and on a memory database.
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { classifyFailure } from '../../src/audit/classify.js'
import { stamp } from '../../src/audit/index.js'
import { openStore, type Store } from '../../src/store/index.js'
import { decision, mutation, orgId } from '../audit/fixtures.js'
import { testDialects } from '../helpers/dialects.js'

/** The writer's line for an event: its columns as one JSON object, `ts` included. */
const lineOf = (e: object & { timestamp: string }, drop: string[] = []): string => {
  const o: Record<string, unknown> = { ts: Date.parse(e.timestamp), ...e }
  for (const k of drop) delete o[k]
  return JSON.stringify(o)
}

const stores: Array<{ name: string; open: () => Promise<Store> }> = [
  ...testDialects(),
  { name: 'sqlite::memory: (no worker)', open: () => openStore('sqlite::memory:') },
]

for (const d of stores) {
  describe(`audit bulk insert [${d.name}]`, () => {
    let store: Store
    beforeAll(async () => {
      store = await d.open()
    })
    afterAll(async () => {
      await store.close()
    })

    const stored = async (org: string) => (await store.db.selectFrom('audit_events').select('id').where('org_id', '=', org).execute()).map((r) => String(r.id)).sort()
    const queued = async (org: string) => (await store.auditLog.pending(100_000, org)).map((p) => p.eventId).sort()
    const ordered = async (ids: string[]) => {
      const rows = await sql<{ event_id: string }>`SELECT event_id FROM audit_export_order`.execute(store.db)
      const want = new Set(ids)
      return rows.rows.map((r) => String(r.event_id)).filter((id) => want.has(id)).sort()
    }

    it('stores and queues every new row once (log queue and export order); a repeated id is skipped and queued nowhere', async () => {
      const org = orgId()
      const first = stamp(decision(org))
      expect(await store.audit.insertEncodedReturningIds([lineOf(first)])).toEqual([first.id])
      const fresh = Array.from({ length: 40 }, (_, i) => stamp(i % 2 ? decision(org, { latency_ms: i }) : mutation(org)))
      // The stored row again, and a row twice within the batch.
      const lines = [lineOf(first), ...fresh.map((e) => lineOf(e)), lineOf(fresh[3])]
      const ids = await store.audit.insertEncodedReturningIds(lines)
      expect(ids.sort()).toEqual(fresh.map((e) => e.id).sort())
      const all = [first, ...fresh].map((e) => e.id).sort()
      expect(await stored(org)).toEqual(all)
      expect(await queued(org)).toEqual(all)
      expect(await ordered(all)).toEqual(all)
      // The same through the rows path (insertBatchReturningIds outside a transaction).
      const more = [stamp(mutation(org)), stamp(decision(org))]
      expect((await store.audit.insertBatchReturningIds([fresh[0], ...more])).sort()).toEqual(more.map((e) => e.id).sort())
      const after = [...all, ...more.map((e) => e.id)].sort()
      expect(await queued(org)).toEqual(after)
      expect(await ordered(after)).toEqual(after)
    })

    it('a row a constraint refuses fails its whole batch with the constraint\'s own error (a data error): nothing of the batch is stored or queued', async () => {
      const org = orgId()
      const good = [stamp(mutation(org)), stamp(decision(org))]
      const bad = stamp(decision(org))
      for (const drop of [['user_id'], ['event_type'], ['ts']]) {
        const err = await store.audit.insertEncodedReturningIds([lineOf(good[0]), lineOf(bad, drop), lineOf(good[1])]).then(() => undefined, (e: unknown) => e)
        expect(err, `without ${drop.join(',')}`).toBeInstanceOf(Error)
        expect(String((err as Error).message)).toMatch(/null/i)
        expect(classifyFailure(err)).toBe('data')
        expect(await stored(org)).toEqual([])
        expect(await queued(org)).toEqual([])
      }
      expect((await store.audit.insertEncodedReturningIds(good.map((e) => lineOf(e)))).sort()).toEqual(good.map((e) => e.id).sort())
      expect(await queued(org)).toEqual(good.map((e) => e.id).sort())
    })
  })
}
