// The audit log against every write verb, and the quarantine.
//
// SQLite: the UPDATE/DELETE triggers of the audit migration do not see `INSERT OR REPLACE` (REPLACE
// deletes the old row without firing DELETE triggers unless recursive_triggers is on), so a deny row
// could be replaced by an allow row. A BEFORE INSERT trigger ignores (RAISE(IGNORE)) any row whose
// id is already stored: plain inserts keep insert-or-ignore semantics, REPLACE and
// `ON CONFLICT DO UPDATE` find no conflict left to act on and change nothing.
// Postgres: `ON CONFLICT DO UPDATE` and MERGE fire the BEFORE UPDATE trigger, which raises.
//
// audit_quarantine keeps events the writer could not store as rows (invalid, too large, refused by
// the database), as safe text with the reason; append-only like the log itself.
import { sql } from 'kysely'
import type { StoreMigration } from './types.js'

export const auditHardening: StoreMigration = {
  name: '20261126T010000-audit-hardening',
  async up(db, dialect) {
    const pg = dialect === 'postgres'
    await db.schema
      .createTable('audit_quarantine')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('org_id', 'text')
      .addColumn('reason', 'text', (c) => c.notNull())
      .addColumn('event', 'text', (c) => c.notNull())
      .addColumn('quarantined_at', 'text', (c) => c.notNull())
      .addColumn('ts', 'bigint', (c) => c.notNull())
      .execute()
    await db.schema.createIndex('audit_quarantine_ts_idx').on('audit_quarantine').columns(['ts', 'id']).execute()

    if (pg) {
      await sql`CREATE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP USING ERRCODE = 'insufficient_privilege';
        END $$`.execute(db)
      await sql`CREATE TRIGGER audit_quarantine_no_update_delete BEFORE UPDATE OR DELETE ON audit_quarantine
        FOR EACH ROW EXECUTE FUNCTION audit_append_only()`.execute(db)
      await sql`CREATE TRIGGER audit_quarantine_no_truncate BEFORE TRUNCATE ON audit_quarantine
        FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only()`.execute(db)
      return
    }
    for (const table of ['audit_events', 'audit_quarantine']) {
      const t = sql.raw(table)
      await sql`CREATE TRIGGER ${sql.raw(`${table}_insert_once`)} BEFORE INSERT ON ${t}
        WHEN EXISTS (SELECT 1 FROM ${t} WHERE id = NEW.id)
        BEGIN SELECT RAISE(IGNORE); END`.execute(db)
    }
    await sql`CREATE TRIGGER audit_quarantine_no_update BEFORE UPDATE ON audit_quarantine
      BEGIN SELECT RAISE(ABORT, 'audit_quarantine is append-only: UPDATE refused'); END`.execute(db)
    await sql`CREATE TRIGGER audit_quarantine_no_delete BEFORE DELETE ON audit_quarantine
      BEGIN SELECT RAISE(ABORT, 'audit_quarantine is append-only: DELETE refused'); END`.execute(db)
  },
}
