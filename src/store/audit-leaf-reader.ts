// A read-only connection for walking one org's leaves with their rows, as arrays of values (no
// object per row): what verification's worker threads read a million-row log with. Each thread
// opens its own (SQLite: a read-only handle on the file, WAL lets it read beside serve; PostgreSQL:
// one client) and reads ranges of leaf indexes. The SQL is `auditLog.leafRows`'s, by range. Rows
// are handed to the caller one at a time as the driver reads them and none is kept, so a range of
// rows is garbage while young instead of a heap of arrays that outlives it.
import type { Client, QueryArrayConfig } from 'pg'
import { storeTypes } from './dialects/pg-types.js'
import { sqlitePath, storeUrlDialect } from './url.js'
import { SQLITE_LOG_JOINS } from './audit-log.js'

/** The leaf columns the reads put before the event's (`e.*`): `l_idx`, `l_event_id`, `l_leaf_hash`. */
export const LEAF_READ_COLUMNS = 3

/**
 * What a range is read into. `begin` comes before the first row with the result's column names (the
 * leaf's three first) and again if the read starts over (everything before it is to be dropped);
 * `row` gets each leaf's values (the event's null when no row has the leaf's id), valid only during
 * the call.
 */
export interface LeafVisitor {
  begin(columns: readonly string[]): void
  row(values: readonly unknown[]): void
}

export interface LeafReader {
  /** How many leaves the org has, and its lowest and highest index (null when none). */
  span(orgId: string): Promise<{ count: number; min: number | null; max: number | null }>
  /** Every leaf index of the org, in order (to cut ranges of a log whose indexes have gaps). */
  indexes(orgId: string): Promise<number[]>
  /** The leaves with `from <= idx < to`, in index order, each with its row's values, into `visit`. */
  range(orgId: string, from: number, to: number, visit: LeafVisitor): Promise<void>
  close(): Promise<void>
}

const COLUMNS = 'SELECT l.idx AS l_idx, l.event_id AS l_event_id, l.leaf_hash AS l_leaf_hash, e.* FROM'
const SELECT = `${COLUMNS} audit_log_leaves l LEFT JOIN audit_events e ON e.id = `
/** SQLite's joins named (audit-log.ts SQLITE_LOG_JOINS says why). */
const SQLITE_SELECT = `${COLUMNS} ${SQLITE_LOG_JOINS.leavesByIndex} LEFT JOIN ${SQLITE_LOG_JOINS.events} ON e.id = `
// The leaf's id is text on both dialects, the row's a uuid on PostgreSQL: a leaf id edited into
// something that is not a uuid finds no row (it is reported removed) instead of failing the read.
// PG_KEY says so exactly, with a regular expression that costs the server about as much as the
// rest of the join. PG_FAST_KEY checks only the shape (36 characters, hyphens where a uuid has
// them): a shaped id whose other characters are all hex digits is exactly what PG_KEY accepts,
// and any other shaped id makes the cast fail, after which the range is read again with PG_KEY.
const PG_KEY = `(CASE WHEN l.event_id ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$' THEN l.event_id::uuid END)`
const PG_FAST_KEY = `(CASE WHEN l.event_id LIKE '________-____-____-____-____________' THEN l.event_id::uuid END)`
const PG_RANGE = 'WHERE l.org_id = $1 AND l.idx >= $2 AND l.idx < $3 ORDER BY l.idx'
/** SQLSTATE of a text that is not a uuid (invalid_text_representation). */
const NOT_A_UUID = '22P02'

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
  const range = db.prepare(`${SQLITE_SELECT}l.event_id WHERE l.org_id = ? AND l.idx >= ? AND l.idx < ? ORDER BY l.idx`).raw(true)
  const columns = range.columns().map((c) => c.name)
  return {
    async span(orgId) {
      const r = span.get(orgId) as { n: number; lo: number | null; hi: number | null }
      return { count: Number(r.n), min: r.lo === null ? null : Number(r.lo), max: r.hi === null ? null : Number(r.hi) }
    },
    async indexes(orgId) {
      return (indexes.all(orgId) as unknown[]).map(Number)
    },
    async range(orgId, from, to, visit) {
      visit.begin(columns)
      for (const r of range.iterate(orgId, from, to) as Iterable<unknown[]>) visit.row(r)
    },
    async close() {
      db.close()
    },
  }
}

async function postgresReader(url: string, schema: string | undefined): Promise<LeafReader> {
  const { default: pg } = await import('pg')
  // As the store's pool reads them: the row's values, and so its leaf bytes, are the same.
  const types = storeTypes(pg)
  // No JIT and no parallel workers: each range is one index-driven join whose plan JIT would compile
  // again every time, and workers would take the cores the verification threads hash on.
  const options = `-c jit=off -c max_parallel_workers_per_gather=0${schema ? ` -c search_path="${schema}"` : ''}`
  const client = new pg.Client({ connectionString: url, types, options })
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
    async range(orgId, from, to, visit) {
      try {
        await stream(pg, client, `${SELECT}${PG_FAST_KEY} ${PG_RANGE}`, [orgId, from, to], visit)
      } catch (err) {
        if ((err as { code?: unknown }).code !== NOT_A_UUID) throw err
        await stream(pg, client, `${SELECT}${PG_KEY} ${PG_RANGE}`, [orgId, from, to], visit)
      }
    },
    async close() {
      await client.end()
    },
  }
}

/** Runs a query whose rows go to `visit` as the driver parses them (none is accumulated). */
function stream(pg: typeof import('pg').default, client: Client, text: string, values: unknown[], visit: LeafVisitor): Promise<void> {
  return new Promise((resolve, reject) => {
    const config: QueryArrayConfig = { text, values, rowMode: 'array' }
    const query = new pg.Query<unknown[]>(config)
    let begun = false
    // A visitor that throws must not throw into the driver's parser: the rest is read and dropped.
    let failed: { err: unknown } | undefined
    const begin = (fields: ReadonlyArray<{ name: string }>) => {
      begun = true
      visit.begin(fields.map((f) => f.name))
    }
    query.on('row', (row: unknown[], result?: { fields: ReadonlyArray<{ name: string }> }) => {
      if (failed) return
      try {
        if (!begun) begin(result!.fields)
        visit.row(row)
      } catch (err) {
        failed = { err }
      }
    })
    query.on('end', (result: { fields: ReadonlyArray<{ name: string }> }) => {
      if (failed) return reject(failed.err)
      try {
        if (!begun) begin(result.fields)
      } catch (err) {
        return reject(err)
      }
      resolve()
    })
    query.on('error', reject)
    void client.query(query)
  })
}
