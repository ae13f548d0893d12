// The appender reads the queue's rows as arrays of values, each as it is read (store.auditLog.pendingBatch
// through the dialect's selectArrays), and encodes them with rowEncoder. Its leaves must be exactly those of the
// read it replaced: the same query read through Kysely as one object per row, encoded by
// storedRowBytes. Rows are stored straight (store.audit.insertBatch), with hostile values, on a
// real PostgreSQL and on SQLite; the committed leaf hashes are compared with the object path's.
import fc from 'fast-check'
import { sql } from 'kysely'
import { v7 as uuidv7 } from 'uuid'
import { describe, expect, it } from 'vitest'
import { ProvableLog } from '../../../src/audit/index.js'
import { canonicalRow, hashLeafHex, rowEncoder, storedRowBytes } from '../../../src/audit/merkle/index.js'
import type { AuditEvent } from '../../../src/contract/index.js'
import { QUEUE_COLUMNS, type AuditLogRepository, type QueuedRow, type Store } from '../../../src/store/index.js'
import { SQLITE_LOG_JOINS } from '../../../src/store/audit-log.js'
import { testDialects } from '../../helpers/dialects.js'
import { orgId } from '../fixtures.js'
import { quietLogger } from '../writer-helpers.js'
import { hostile } from './hostile-rows.js'

/** The queue's head as the appender read it before: the driver's object per row. */
async function objectRead(store: Store, limit: number): Promise<Array<Record<string, unknown>>> {
  const query = store.dialect === 'postgres'
    ? sql`SELECT e.*, p.seq AS p_seq, p.event_id AS p_event_id, p.org_id AS p_org_id, l.idx AS p_leafed
        FROM audit_log_pending p LEFT JOIN audit_events e ON e.id = p.event_id LEFT JOIN audit_log_leaves l ON l.event_id = p.event_id::text
        ORDER BY p.seq LIMIT ${limit}`
    : sql`SELECT e.*, p.seq AS p_seq, p.event_id AS p_event_id, p.org_id AS p_org_id, l.idx AS p_leafed
        FROM audit_log_pending p LEFT JOIN ${sql.raw(SQLITE_LOG_JOINS.events)} ON e.id = p.event_id LEFT JOIN ${sql.raw(SQLITE_LOG_JOINS.leavesByEvent)} ON l.event_id = p.event_id
        ORDER BY p.seq LIMIT ${limit}`
  return (await query.execute(store.db)).rows as Array<Record<string, unknown>>
}

/** The queue's head as the appender reads it now, kept (each entry's values copied). */
async function queueHead(auditLog: AuditLogRepository): Promise<{ columns: readonly string[]; entries: QueuedRow[] }> {
  const out: { columns: readonly string[]; entries: QueuedRow[] } = { columns: [], entries: [] }
  await auditLog.pendingBatch(100, {
    begin: (columns) => Object.assign(out, { columns, entries: [] }),
    entry: (q) => out.entries.push(q.values ? { ...q, values: [...q.values] } : q),
  })
  return out
}

for (const d of testDialects()) {
  describe(`the appender's read of the queue [${d.name}]`, () => {
    it('gives every row the bytes of the object read it replaced, and the log commits their hashes', { timeout: 300_000 }, async () => {
      const store = await d.open()
      const log = new ProvableLog({ store, logger: quietLogger() })
      await fc.assert(fc.asyncProperty(fc.array(hostile, { minLength: 1, maxLength: 8 }), async (partials) => {
        const org = orgId()
        const events = partials.map((p) => ({ ...p, id: uuidv7(), org_id: org }) as unknown as AuditEvent)
        for (const e of events) for (const [k, v] of Object.entries(e)) if (v === null) delete (e as unknown as Record<string, unknown>)[k]
        expect(await store.audit.insertBatch(events)).toBe(events.length)

        const objects = await objectRead(store, 100)
        const batch = await queueHead(store.auditLog)
        // Inside a transaction the read goes through it (as objects turned into arrays): the same entries.
        expect(await store.transaction((tx) => queueHead(tx.auditLog))).toEqual(batch)
        expect(batch.entries.map((q) => q.eventId)).toEqual(objects.map((o) => String(o.p_event_id)))
        const encode = rowEncoder(batch.columns, QUEUE_COLUMNS)
        const expected = new Map<string, string>()
        batch.entries.forEach((q, i) => {
          const before = storedRowBytes(objects[i], QUEUE_COLUMNS)
          expect(q.values).toBeDefined()
          expect(encode(q.values!)).toBe(before)
          expected.set(q.eventId, hashLeafHex(before))
        })

        expect(await log.append()).toBe(events.length)
        const leaves = await store.auditLog.leaves(org, 0, events.length)
        expect(leaves.map((l) => [l.eventId, l.leafHash])).toEqual(leaves.map((l) => [l.eventId, expected.get(l.eventId)]))
        for (const l of leaves) expect(l.leafHash).toBe(hashLeafHex(canonicalRow((await store.audit.getById(org, l.eventId))!)))
      }), { numRuns: 40 })
    })
  })
}

