// The append-only audit log. JSON columns are TEXT on SQLite and JSONB on Postgres; `ts` holds the
// timestamp as epoch milliseconds so ordering, ranges and time buckets are plain integer
// arithmetic in both dialects. The database itself refuses UPDATE and DELETE (and TRUNCATE on
// Postgres): append-only does not depend on every code path behaving.
import { sql } from 'kysely'
import type { StoreMigration } from './types.js'

const TEXT_COLUMNS = [
  'workspace_id', 'task_id', 'agent_role', 'agent_provider', 'destination', 'method', 'path', 'decision',
  'reason', 'policy_type', 'phase', 'capability_name',
] as const
const INT_COLUMNS = ['latency_ms', 'transforms_applied', 'validations_applied'] as const
const JSON_COLUMNS = ['detail', 'debits', 'budget_state', 'floored', 'transforms_failed', 'auth_used', 'auth_failures'] as const

export const audit: StoreMigration = {
  name: '20261122T100100-audit',
  async up(db, dialect) {
    const pg = dialect === 'postgres'
    let table = db.schema
      .createTable('audit_events')
      .addColumn('id', pg ? 'uuid' : 'text', (c) => c.primaryKey())
      .addColumn('org_id', 'text', (c) => c.notNull())
      .addColumn('user_id', 'text', (c) => c.notNull())
      .addColumn('timestamp', 'text', (c) => c.notNull())
      .addColumn('ts', 'bigint', (c) => c.notNull())
      .addColumn('event_type', 'text', (c) => c.notNull())
      .addColumn('category', 'text', (c) => c.notNull())
      .addColumn('actor', 'text', (c) => c.notNull())
    for (const col of TEXT_COLUMNS) table = table.addColumn(col, 'text')
    for (const col of INT_COLUMNS) table = table.addColumn(col, 'integer')
    for (const col of JSON_COLUMNS) table = table.addColumn(col, pg ? 'jsonb' : 'text')
    await table.execute()

    // Every query is org-scoped and pages on (ts, id); the other indexes serve the most common
    // filters (workspace pages, :own narrowing, event type, proxy decisions).
    const indexes: Array<[string, string[]]> = [
      ['audit_events_org_ts_idx', ['org_id', 'ts', 'id']],
      ['audit_events_org_ws_ts_idx', ['org_id', 'workspace_id', 'ts', 'id']],
      ['audit_events_org_user_ts_idx', ['org_id', 'user_id', 'ts', 'id']],
      ['audit_events_org_type_ts_idx', ['org_id', 'event_type', 'ts', 'id']],
    ]
    for (const [name, columns] of indexes) await db.schema.createIndex(name).on('audit_events').columns(columns).execute()

    if (pg) {
      await sql`CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          RAISE EXCEPTION 'audit_events is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
        END $$`.execute(db)
      await sql`CREATE TRIGGER audit_events_no_update_delete BEFORE UPDATE OR DELETE ON audit_events
        FOR EACH ROW EXECUTE FUNCTION audit_events_append_only()`.execute(db)
      await sql`CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
        FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only()`.execute(db)
    } else {
      await sql`CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
        BEGIN SELECT RAISE(ABORT, 'audit_events is append-only: UPDATE refused'); END`.execute(db)
      await sql`CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
        BEGIN SELECT RAISE(ABORT, 'audit_events is append-only: DELETE refused'); END`.execute(db)
    }
  },
}
