// The provable audit log (docs/audit.md "The provable log"): a Merkle tree per org over the rows
// in the order the appender took them.
// - audit_log_pending: the rows committed but not yet in a tree, fed by a trigger on audit_events
//   in the inserting transaction itself, so no committed row can be missed whichever path (the
//   writer's batch, a mutation's transaction, the admin CLI) inserted it, and the writer does no
//   more work than one more insert per row. Rows already stored when this migration runs are
//   queued in (ts, id) order.
// - audit_log_leaves: leaf `idx` of an org's tree is row `event_id`, with the leaf hash it had
//   when appended; audit_log_trees: each tree's size, right edge (compact range) and root.
// - audit_checkpoints: the signed checkpoints, one per (org, size) whichever replica signed it;
//   audit_log_keys: every public key that ever signed one (rotation keeps the old ones).
import { sql } from 'kysely'
import type { StoreMigration } from './types.js'

export const auditMerkle: StoreMigration = {
  name: '20261129T060000-audit-merkle',
  async up(db, dialect) {
    const pg = dialect === 'postgres'
    let pending = db.schema.createTable('audit_log_pending')
    pending = pg
      ? pending.addColumn('seq', 'bigserial', (c) => c.primaryKey())
      : pending.addColumn('seq', 'integer', (c) => c.primaryKey().autoIncrement())
    // uuid on PostgreSQL, as audit_events.id: the appender's join reaches each row through its key.
    await pending.addColumn('event_id', pg ? 'uuid' : 'text', (c) => c.notNull()).addColumn('org_id', 'text', (c) => c.notNull()).execute()

    await db.schema
      .createTable('audit_log_leaves')
      .addColumn('org_id', 'text', (c) => c.notNull())
      .addColumn('idx', 'bigint', (c) => c.notNull())
      .addColumn('event_id', 'text', (c) => c.notNull())
      .addColumn('leaf_hash', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('audit_log_leaves_pk', ['org_id', 'idx'])
      .execute()
    await db.schema.createIndex('audit_log_leaves_event_idx').on('audit_log_leaves').column('event_id').unique().execute()

    await db.schema
      .createTable('audit_log_trees')
      .addColumn('org_id', 'text', (c) => c.primaryKey())
      .addColumn('size', 'bigint', (c) => c.notNull())
      .addColumn('edge', 'text', (c) => c.notNull())
      .addColumn('root', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute()

    await db.schema
      .createTable('audit_checkpoints')
      .addColumn('org_id', 'text', (c) => c.notNull())
      .addColumn('size', 'bigint', (c) => c.notNull())
      .addColumn('root', 'text', (c) => c.notNull())
      .addColumn('time', 'text', (c) => c.notNull())
      .addColumn('key_name', 'text', (c) => c.notNull())
      .addColumn('note', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('audit_checkpoints_pk', ['org_id', 'size'])
      .execute()

    await db.schema
      .createTable('audit_log_keys')
      .addColumn('name', 'text', (c) => c.primaryKey())
      .addColumn('vkey', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .execute()

    if (pg) {
      await sql`CREATE FUNCTION audit_log_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          INSERT INTO audit_log_pending (event_id, org_id) SELECT id, org_id FROM new_rows;
          RETURN NULL;
        END $$`.execute(db)
      await sql`CREATE TRIGGER audit_events_enqueue AFTER INSERT ON audit_events
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION audit_log_enqueue()`.execute(db)
    } else {
      await sql`CREATE TRIGGER audit_events_enqueue AFTER INSERT ON audit_events
        BEGIN INSERT INTO audit_log_pending (event_id, org_id) VALUES (NEW.id, NEW.org_id); END`.execute(db)
    }
    await sql`INSERT INTO audit_log_pending (event_id, org_id) SELECT id, org_id FROM audit_events ORDER BY ts, id`.execute(db)
  },
}
