// The durable cursors of the audit sinks (migrations/20261129T061000-audit-sinks.ts): each sink's
// acknowledged position in audit_export_order, and the lease that lets one replica at a time ship
// it. The lease is claimed and every cursor move is made with a conditional update on the holder
// (and, for a move, on the position it starts from), so a replica that lost its lease can move
// nothing: like the OAuth refresh lease (oauth-tables.ts). Times are epoch milliseconds.
import { sql, type Kysely } from 'kysely'
import type { AuditEvent } from '../contract/index.js'
import { fromRow } from './repositories/audit.js'

type Num = number | string | bigint
interface Db {
  audit_export_order: { seq: Num; tx: Num; event_id: string }
  audit_sink_cursors: { sink: string; tx: Num; seq: Num; shipped: Num; holder: string | null; lease_until: Num | null; updated_at: string }
}

/** A position in the export order: (tx, seq), compared as a pair. The start of the log is (0, 0). */
export interface ExportPosition { tx: number; seq: number }
export interface SinkCursor { sink: string; position: ExportPosition; shipped: number; holder: string | null; leaseUntil: number | null; updatedAt: string }
export interface ExportedRow { position: ExportPosition; event: AuditEvent }

// long-function: one object literal of short methods over the sinks' two tables, sharing `db`
export function auditSinkCursors(store: { readonly db: Kysely<any>; readonly dialect: string }) {
  const db = store.db as unknown as Kysely<Db>
  const pg = store.dialect === 'postgres'

  async function get(sink: string): Promise<SinkCursor | undefined> {
    const r = await db.selectFrom('audit_sink_cursors').selectAll().where('sink', '=', sink).executeTakeFirst()
    if (!r) return undefined
    return {
      sink: r.sink, position: { tx: Number(r.tx), seq: Number(r.seq) }, shipped: Number(r.shipped), holder: r.holder,
      leaseUntil: r.lease_until === null ? null : Number(r.lease_until), updatedAt: r.updated_at,
    }
  }

  return {
    get,

    /**
     * Takes (or renews) the sink's lease for `holder` until `now + ttlMs` when it is free, expired
     * or already this holder's; creates the cursor at the start of the log on first use.
     */
    async claim(sink: string, holder: string, now: number, ttlMs: number): Promise<boolean> {
      await db.insertInto('audit_sink_cursors')
        .values({ sink, tx: 0, seq: 0, shipped: 0, holder: null, lease_until: null, updated_at: new Date(now).toISOString() })
        .onConflict((oc) => oc.column('sink').doNothing())
        .execute()
      const r = await db.updateTable('audit_sink_cursors')
        .set({ holder, lease_until: now + ttlMs })
        .where('sink', '=', sink)
        .where((eb) => eb.or([eb('holder', 'is', null), eb('holder', '=', holder), eb('lease_until', '<', now)]))
        .executeTakeFirst()
      return Number(r.numUpdatedRows) === 1
    },

    /** Gives the lease up (a clean stop), so another replica takes the sink at once. */
    async release(sink: string, holder: string): Promise<void> {
      await db.updateTable('audit_sink_cursors').set({ holder: null, lease_until: null })
        .where('sink', '=', sink).where('holder', '=', holder).execute()
    },

    /**
     * Moves the cursor from `from` to `to` (the receiver acknowledged the rows between them) and
     * renews the lease; false, and nothing changed, when `holder` no longer holds the lease or the
     * cursor is no longer at `from`.
     */
    async advance(sink: string, holder: string, from: ExportPosition, to: ExportPosition, count: number, now: number, ttlMs: number): Promise<boolean> {
      const r = await db.updateTable('audit_sink_cursors')
        .set((eb) => ({ tx: to.tx, seq: to.seq, shipped: eb('shipped', '+', count), lease_until: now + ttlMs, updated_at: new Date(now).toISOString() }))
        .where('sink', '=', sink).where('holder', '=', holder).where('tx', '=', from.tx).where('seq', '=', from.seq)
        .executeTakeFirst()
      return Number(r.numUpdatedRows) === 1
    },

    /**
     * Up to `limit` rows after `after` in export order, only from transactions that can no longer
     * commit anything below them (PostgreSQL: under the oldest running transaction), so a row never
     * appears behind a cursor that has passed its position.
     */
    async rowsAfter(after: ExportPosition, limit: number): Promise<ExportedRow[]> {
      // SQLite: tx is always 0 and seq is the primary key, so the page is a range scan on seq.
      const { rows } = pg
        ? await sql<Record<string, unknown>>`
          SELECT o.tx AS export_tx, o.seq AS export_seq, e.* FROM audit_export_order o JOIN audit_events e ON e.id = o.event_id::uuid
          WHERE (o.tx, o.seq) > (${after.tx}, ${after.seq}) AND o.tx < pg_snapshot_xmin(pg_current_snapshot())::text::bigint
          ORDER BY o.tx, o.seq LIMIT ${limit}`.execute(db)
        : await sql<Record<string, unknown>>`
          SELECT o.tx AS export_tx, o.seq AS export_seq, e.* FROM audit_export_order o JOIN audit_events e ON e.id = o.event_id
          WHERE o.seq > ${after.seq} ORDER BY o.seq LIMIT ${limit}`.execute(db)
      return rows.map((r) => {
        const { export_tx: tx, export_seq: seq, ...row } = r
        return { position: { tx: Number(tx), seq: Number(seq) }, event: fromRow(row) }
      })
    },
  }
}

export type AuditSinkCursors = ReturnType<typeof auditSinkCursors>
