// A read-only connection for walking one org's leaves with their rows, as arrays of values (no
// object per row): what verification's worker threads read a million-row log with. Each thread
// opens its own (SQLite: a read-only handle on the file, WAL lets it read beside serve; PostgreSQL:
// one client) and reads ranges of leaf indexes. The SQL is `auditLog.leafRows`'s, by range.
import type { ClientConfig } from 'pg'
import { sqlitePath, storeUrlDialect } from './url.js'

/** The leaf columns the reads put before the event's (`e.*`): `l_idx`, `l_event_id`, `l_leaf_hash`. */
export const LEAF_READ_COLUMNS = 3

export interface LeafRows {
  /** Column names, the leaf's three first. */
  columns: string[]
  rows: Iterable<unknown[]>
}

export interface LeafReader {
  /** How many leaves the org has, and its lowest and highest index (null when none). */
  span(orgId: string): Promise<{ count: number; min: number | null; max: number | null }>
  /** Every leaf index of the org, in order (to cut ranges of a log whose indexes have gaps). */
  indexes(orgId: string): Promise<number[]>
  /** The leaves with `from <= idx < to`, in index order, each with its row's values (null when no row has the leaf's id). */
  range(orgId: string, from: number, to: number): Promise<LeafRows>
  close(): Promise<void>
}

const SELECT = 'SELECT l.idx AS l_idx, l.event_id AS l_event_id, l.leaf_hash AS l_leaf_hash, e.* FROM audit_log_leaves l LEFT JOIN audit_events e ON e.id = '
// The leaf's id is text on both dialects, the row's a uuid on PostgreSQL: a leaf id edited into
// something that is not a uuid finds no row (it is reported removed) instead of failing the read.
const PG_KEY = `(CASE WHEN l.event_id ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$' THEN l.event_id::uuid END)`

export async function openLeafReader(url: string, opts: { schema?: string } = {}): Promise<LeafReader> {
  return storeUrlDialect(url) === 'sqlite' ? sqliteReader(sqlitePath(url)) : postgresReader(url, opts.schema)
}

async function sqliteReader(path: string): Promise<LeafReader> {
  const { default: BetterSqlite3 } = await import('better-sqlite3')
  const db = new BetterSqlite3(path, { readonly: true, fileMustExist: true })
  db.pragma('busy_timeout = 5000')
  db.pragma('cache_size = -65536')
  db.pragma('mmap_size = 1073741824')
  const span = db.prepare('SELECT count(*) AS n, min(idx) AS lo, max(idx) AS hi FROM audit_log_leaves WHERE org_id = ?')
  const indexes = db.prepare('SELECT idx FROM audit_log_leaves WHERE org_id = ? ORDER BY idx').pluck()
  const range = db.prepare(`${SELECT}l.event_id WHERE l.org_id = ? AND l.idx >= ? AND l.idx < ? ORDER BY l.idx`).raw(true)
  const columns = range.columns().map((c) => c.name)
  return {
    async span(orgId) {
      const r = span.get(orgId) as { n: number; lo: number | null; hi: number | null }
      return { count: Number(r.n), min: r.lo === null ? null : Number(r.lo), max: r.hi === null ? null : Number(r.hi) }
    },
    async indexes(orgId) {
      return (indexes.all(orgId) as unknown[]).map(Number)
    },
    // A lazy iterator: rows are read as the caller takes them, none held beyond the one in hand.
    async range(orgId, from, to) {
      return { columns, rows: range.iterate(orgId, from, to) as Iterable<unknown[]> }
    },
    async close() {
      db.close()
    },
  }
}

async function postgresReader(url: string, schema: string | undefined): Promise<LeafReader> {
  const { default: pg } = await import('pg')
  // As the store's pool reads them (dialects/postgres.ts): the row's values, and so its leaf bytes, are the same.
  const types = {
    getTypeParser(oid: number, format?: string) {
      if (oid === 20 || oid === 1700) return (v: string) => Number(v)
      return (pg.types.getTypeParser as (oid: number, format?: string) => unknown)(oid, format)
    },
  }
  const client = new pg.Client({ connectionString: url, types: types as ClientConfig['types'], ...(schema ? { options: `-c search_path="${schema}"` } : {}) })
  client.on('error', () => {})
  await client.connect()
  return {
    async span(orgId) {
      const r = (await client.query<{ n: number; lo: number | null; hi: number | null }>('SELECT count(*) AS n, min(idx) AS lo, max(idx) AS hi FROM audit_log_leaves WHERE org_id = $1', [orgId])).rows[0]
      return { count: Number(r.n), min: r.lo === null ? null : Number(r.lo), max: r.hi === null ? null : Number(r.hi) }
    },
    async indexes(orgId) {
      const r = await client.query<unknown[]>({ text: 'SELECT idx FROM audit_log_leaves WHERE org_id = $1 ORDER BY idx', values: [orgId], rowMode: 'array' })
      return r.rows.map((row) => Number(row[0]))
    },
    async range(orgId, from, to) {
      const r = await client.query<unknown[]>({ text: `${SELECT}${PG_KEY} WHERE l.org_id = $1 AND l.idx >= $2 AND l.idx < $3 ORDER BY l.idx`, values: [orgId, from, to], rowMode: 'array' })
      return { columns: r.fields.map((f) => f.name), rows: r.rows }
    },
    async close() {
      await client.end()
    },
  }
}
