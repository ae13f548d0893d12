// The provable log switched off for a benchmark's "before": every trigger that queues audit rows
// for the appender (whatever a build names it) dropped, so the writer inserts as a build without
// the log would, and no appender runs. Used by bench:audit, bench/audit-ingest.ts and bench:proxy.

type Query = (text: string) => Promise<ReadonlyArray<Record<string, unknown>>>

/** Drops the queue triggers on `audit_events`; returns their names (throws when there is none). */
export async function dropLogQueueTriggers(dialect: string, query: Query): Promise<string[]> {
  const names = (dialect === 'sqlite'
    ? await query(`SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'audit_events' AND sql LIKE '%audit_log_pending%'`)
    : await query(`SELECT t.tgname AS name FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid WHERE t.tgrelid = 'audit_events'::regclass AND p.prosrc LIKE '%audit_log_pending%'`)
  ).map((r) => String(r.name))
  for (const n of names) await query(dialect === 'sqlite' ? `DROP TRIGGER "${n}"` : `DROP TRIGGER "${n}" ON audit_events`)
  if (names.length === 0) throw new Error('no queue trigger of the provable log found to drop')
  return names
}
