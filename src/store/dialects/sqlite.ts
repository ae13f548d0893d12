// SQLite through better-sqlite3: one file, WAL so readers never block the writer; a statement that
// finds the write lock held by another connection waits for it on a timer, never by sleeping on the
// event loop (sqlite-driver.ts).
// notify/listen is an in-process emitter shared by every Store opened on the same file in this
// process; SQLite has no cross-process notification (multi-replica deployments use Postgres).

import { EventEmitter } from 'node:events'
import { mkdirSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import BetterSqlite3 from 'better-sqlite3'
import { Kysely, sql } from 'kysely'
import type { Database } from '../schema.js'
import { rowsOfRecords } from './json-records.js'
import { SqliteBulkWorker, type BulkInsertText } from './sqlite-bulk-worker.js'
import { LockWaitingSqliteDialect, whenNotBusy } from './sqlite-driver.js'
import { watchWal } from './sqlite-wal.js'
import { assertChannel, type ArrayVisitor, type BulkColumn, type StoreDialect } from './types.js'

const emitters = new Map<string, { emitter: EventEmitter; refs: number }>()

function sharedEmitter(file: string): EventEmitter {
  let entry = emitters.get(file)
  if (!entry) {
    entry = { emitter: new EventEmitter(), refs: 0 }
    entry.emitter.setMaxListeners(0)
    emitters.set(file, entry)
  }
  entry.refs++
  return entry.emitter
}

function releaseEmitter(file: string): void {
  const entry = emitters.get(file)
  if (entry && --entry.refs <= 0) emitters.delete(file)
}

/**
 * Opens `path` (created with its parent directories when missing). `:memory:` is allowed for tests.
 * `secondary`: another connection of a process that keeps the database itself (the appender's
 * thread), so no planner upkeep here, which could take the write lock while the writer needs it.
 */
export function openSqlite(path: string, opts: { secondary?: boolean } = {}): StoreDialect {
  const file = path === ':memory:' ? `:memory:${Math.random()}` : resolve(path)
  if (path !== ':memory:') mkdirSync(dirname(file), { recursive: true })
  const database = new BetterSqlite3(path === ':memory:' ? ':memory:' : file)
  configure(database, opts.secondary === true, path !== ':memory:' && opts.secondary !== true)
  const db = new Kysely<Database>({ dialect: new LockWaitingSqliteDialect(database) })
  const optimizer = opts.secondary ? undefined : setInterval(() => void sql`PRAGMA optimize`.execute(db).catch(() => {}), 3_600_000)
  optimizer?.unref()
  const emitter = sharedEmitter(file)
  let closed = false
  const statements = new Map<string, BetterSqlite3.Statement>()
  // Bulk inserts (the audit log's group commit) run on a worker thread with its own connection;
  // an in-memory database cannot be shared with one, so it keeps them on this thread.
  const bulk = path === ':memory:' ? undefined : new SqliteBulkWorker(file)
  // The event loop's connection never runs a checkpoint (configure): a commit of its own that
  // crossed the threshold would copy and sync ~40 MiB with every request of the process waiting.
  // The bulk worker checkpoints as it commits; a WAL grown past the threshold by this connection's
  // writes alone (no batch for a while) is handed to it from here.
  const walWatch = bulk && !opts.secondary ? watchWal(file, WAL_CHECKPOINT_PAGES, () => bulk.checkpoint()) : undefined

  // selectArrays' statements (in raw mode) apart: a statement's mode is its own.
  const local = { bulk, statements, arrayReads: new Map<string, BetterSqlite3.Statement>(), database, db }
  const insertIgnoreMany = (table: string, columns: readonly BulkColumn[], rows: readonly unknown[][], key: string) => insertRows(local, table, columns, rows, key)

  return {
    name: 'sqlite',
    capabilities: { rowLocks: false, crossProcessNotify: false, sharedAcrossHosts: false, maxBindParameters: 32_766 },
    db,
    async notify(channel, payload) {
      assertChannel(channel)
      // Deliver on a later tick, like a database notification: never inside the caller's stack.
      setImmediate(() => emitter.emit(channel, payload))
    },
    async listen(channel, handler) {
      assertChannel(channel)
      emitter.on(channel, handler)
      return async () => {
        emitter.off(channel, handler)
      }
    },
    jsonHasKey(column, key) {
      return sql<boolean>`(json_type(${sql.ref(column)}, ${jsonPath([key])}) IS NOT NULL)`
    },
    jsonNonEmpty(column) {
      return sql<boolean>`(${sql.ref(column)} IS NOT NULL AND EXISTS (SELECT 1 FROM json_each(${sql.ref(column)})))`
    },
    jsonNumber(column, path) {
      const p = jsonPath(path)
      // typeof() of the extracted value (not json_type) lets SQLite reuse its parse of this row's JSON.
      const v = sql`json_extract(${sql.ref(column)}, ${p})`
      return sql<number | null>`(CASE WHEN typeof(${v}) IN ('integer', 'real') THEN ${v} END)`
    },
    insertIgnoreMany,
    async insertJsonRecords(table: string, columns: readonly BulkColumn[], records: readonly string[], key: string) {
      // Read where the rows are inserted: on the bulk worker, so this thread only posts the strings.
      // (SQLite's json_each with one `->>` per column cost more CPU in total than JSON.parse.)
      const names = columns.map((c) => c.name)
      const text = insertText(table, names, key)
      const jsonColumns = columns.map((c) => c.pgType === 'jsonb')
      if (bulk) return bulk.runRecords(text, records, jsonColumns, names, names.indexOf(key))
      return insertIgnoreMany(table, columns, records.length ? rowsOfRecords(`[${records.join(',')}]`, names, jsonColumns) : [], key)
    },
    selectArrays: (text, parameters, visit) => readArrays(local, text, parameters, visit),
    async close() {
      if (closed) return
      closed = true
      clearInterval(optimizer)
      clearInterval(walWatch)
      releaseEmitter(file)
      await bulk?.close()
      await db.destroy()
    },
  }
}

/** WAL pages (of 4 KiB) past which a checkpoint runs: ~40 MiB. */
export const WAL_CHECKPOINT_PAGES = 10_000

/**
 * The connection's settings (the bulk worker sets its own write-side subset). `eventLoop`: the
 * connection serves the process's event loop beside a bulk worker, so it never checkpoints.
 */
function configure(database: BetterSqlite3.Database, secondary: boolean, eventLoop: boolean): void {
  database.pragma('journal_mode = WAL')
  database.pragma('busy_timeout = 5000')
  // NORMAL is durable across application crashes in WAL mode; only an OS crash can lose the last commits.
  database.pragma('synchronous = NORMAL')
  // Checkpoint every ~40 MiB of WAL instead of the default ~4 MiB: the audit log's hot pages (the
  // append end of each index) are copied into the database file once per checkpoint, so rarer
  // checkpoints write them fewer times (cheaper ingest; docs/storage.md has the figures). The
  // cost is a larger -wal file between checkpoints and a longer pause on the commit that runs one.
  database.pragma(`wal_autocheckpoint = ${eventLoop ? 0 : WAL_CHECKPOINT_PAGES}`)
  database.pragma('foreign_keys = ON')
  // A 64 MiB page cache keeps the audit indexes' hot pages in memory at millions of rows.
  database.pragma('cache_size = -65536')
  // Reads through a memory map (up to 1 GiB of the file) instead of a read() copy per page: stats
  // over the audit log visit every row of the range. An I/O error on a
  // mapped page surfaces as a signal rather than an error code (SQLite's documented trade-off).
  database.pragma('mmap_size = 1073741824')
  // Planner statistics: refresh what changed since the last run (cheap with the analysis limit),
  // at open and hourly, so filtered audit pages pick the most selective index.
  if (!secondary) {
    database.pragma('analysis_limit = 1000')
    database.pragma('optimize = 0x10002')
  }
  // The settings above may wait for a lock (this is the open, not a request); from here on a busy
  // statement fails at once and the driver waits for the lock off the event loop (sqlite-driver.ts).
  database.pragma('busy_timeout = 0')
}

/** The bulk insert: on the worker thread, or on this connection for a memory database. */
async function insertRows(
  conn: { bulk: SqliteBulkWorker | undefined; statements: Map<string, BetterSqlite3.Statement>; database: BetterSqlite3.Database; db: Kysely<Database> },
  table: string, columns: readonly BulkColumn[], rows: readonly unknown[][], key: string,
): Promise<string[]> {
  const { bulk, statements, database, db } = conn
  const names = columns.map((c) => c.name)
  const keyIndex = names.indexOf(key)
  const text = insertText(table, names, key)
  if (rows.length === 0) return []
  if (bulk) return bulk.run(text, rows, keyIndex)
  const prepared = (t: string) => {
    let stmt = statements.get(t)
    if (!stmt) statements.set(t, (stmt = database.prepare(t)))
    return stmt
  }
  const insert = prepared(text.text)
  const strict = prepared(text.strict)
  const inserted: string[] = []
  const runAll = database.transaction(() => {
    for (const row of rows) if (insert.run(row).changes === 1 || strict.run(row).changes === 1) inserted.push(String(row[keyIndex]))
  })
  // Holding Kysely's connection keeps every other query of this store out of our transaction.
  await db.connection().execute(async () => runAll.immediate())
  return inserted
}

/** selectArrays: a statement prepared once per text, in raw mode, stepped into the visitor. */
async function readArrays(
  conn: { arrayReads: Map<string, BetterSqlite3.Statement>; database: BetterSqlite3.Database; db: Kysely<Database> },
  text: string, parameters: readonly unknown[], visit: ArrayVisitor,
): Promise<void> {
  let read = conn.arrayReads.get(text)
  if (!read) {
    if (conn.arrayReads.size >= 64) conn.arrayReads.clear()
    conn.arrayReads.set(text, (read = conn.database.prepare(text).raw(true)))
  }
  const stmt = read
  // Through Kysely's connection: the read waits for (never runs inside) another query's
  // transaction. Rows go to the visitor as SQLite steps, so none outlives its young generation.
  await whenNotBusy(() => conn.db.connection().execute(async () => {
    visit.begin(stmt.columns().map((c) => c.name))
    for (const values of stmt.iterate(...parameters) as Iterable<unknown[]>) visit.row(values)
  }))
}

/**
 * The bulk insert's statements. `INSERT OR IGNORE` first: no conflict in it can abort, so SQLite
 * runs it without a statement journal, which a table with triggers (the audit log's) otherwise
 * opens for every row, copying each page the row touches; that copy was most of a row's cost.
 * OR IGNORE also skips a row a NOT NULL or CHECK constraint refuses, and applies to the triggers'
 * own inserts; so a skipped row is run again through `strict`, which skips only a repeated key
 * and throws the constraint's error otherwise (rolling the batch back, as before).
 */
function insertText(table: string, names: readonly string[], key: string): BulkInsertText {
  const columns = `${quote(table)} (${names.map(quote).join(', ')}) VALUES (${names.map(() => '?').join(', ')})`
  return { text: `INSERT OR IGNORE INTO ${columns}`, strict: `INSERT INTO ${columns} ON CONFLICT (${quote(key)}) DO NOTHING` }
}

function quote(identifier: string): string {
  return `"${identifier.replaceAll('"', '""')}"`
}

/** A JSON path with every key quoted, passed as a bound parameter (never spliced into SQL). */
function jsonPath(keys: readonly string[]): string {
  return '$' + keys.map((k) => '.' + JSON.stringify(k)).join('')
}
