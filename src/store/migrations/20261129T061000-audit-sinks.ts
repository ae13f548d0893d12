// Shipping the audit log to outside receivers (docs/audit.md "OTLP streaming").
// - audit_export_order: one row per stored audit row, written by a trigger in the inserting
//   transaction itself (whichever path inserted it), numbered in insertion order. On PostgreSQL it
//   also keeps the inserting transaction's id (`tx`, an xid8): concurrent transactions take `seq`
//   numbers in one order and commit in another, so a reader pages on (tx, seq) and stops below the
//   oldest transaction still running (pg_snapshot_xmin); everything under that line is committed and
//   nothing can appear under it later. On SQLite writes are serial, `tx` is 0 and `seq` is commit order.
//   Rows stored before this migration are numbered in (ts, id) order.
// - audit_sink_cursors: per sink (a receiver an operator configured), the last position the receiver
//   acknowledged, how many rows it took, and the lease (holder + expiry in epoch milliseconds) of the
//   one replica shipping it.
import { sql } from 'kysely'
import type { StoreMigration } from './types.js'

export const auditSinks: StoreMigration = {
  name: '20261129T061000-audit-sinks',
  async up(db, dialect) {
    const pg = dialect === 'postgres'
    let order = db.schema.createTable('audit_export_order')
    order = pg
      ? order.addColumn('seq', 'bigserial', (c) => c.notNull())
      : order.addColumn('seq', 'integer', (c) => c.primaryKey().autoIncrement())
    order = order.addColumn('tx', 'bigint', (c) => c.notNull()).addColumn('event_id', 'text', (c) => c.notNull())
    if (pg) order = order.addPrimaryKeyConstraint('audit_export_order_pk', ['tx', 'seq'] as never)
    await order.execute()

    await db.schema
      .createTable('audit_sink_cursors')
      .addColumn('sink', 'text', (c) => c.primaryKey())
      .addColumn('tx', 'bigint', (c) => c.notNull())
      .addColumn('seq', 'bigint', (c) => c.notNull())
      .addColumn('shipped', 'bigint', (c) => c.notNull())
      .addColumn('holder', 'text')
      .addColumn('lease_until', 'bigint')
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute()

    if (pg) {
      await sql`CREATE FUNCTION audit_export_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          INSERT INTO audit_export_order (tx, event_id)
            SELECT pg_current_xact_id()::text::bigint, id::text FROM new_rows ORDER BY ts, id;
          RETURN NULL;
        END $$`.execute(db)
      await sql`CREATE TRIGGER audit_events_export_order AFTER INSERT ON audit_events
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION audit_export_enqueue()`.execute(db)
      await sql`INSERT INTO audit_export_order (tx, event_id) SELECT 0, id::text FROM audit_events ORDER BY ts, id`.execute(db)
    } else {
      await sql`CREATE TRIGGER audit_events_export_order AFTER INSERT ON audit_events
        BEGIN INSERT INTO audit_export_order (tx, event_id) VALUES (0, NEW.id); END`.execute(db)
      await sql`INSERT INTO audit_export_order (tx, event_id) SELECT 0, id FROM audit_events ORDER BY ts, id`.execute(db)
    }
  },
}
