// The shape every storage dialect exposes. Repositories and the audit module ask for a
// capability or a SQL fragment here; nothing outside src/store/dialects tests the URL scheme.

import type { Kysely, RawBuilder } from 'kysely'
import type { Database } from '../schema.js'

export type DialectName = 'sqlite' | 'postgres'

export interface DialectCapabilities {
  /** `SELECT … FOR UPDATE` exists (Postgres). SQLite serialises writers instead. */
  readonly rowLocks: boolean
  /** notify() reaches other processes on the same database (Postgres LISTEN/NOTIFY). */
  readonly crossProcessNotify: boolean
  /**
   * Processes on other hosts can share this database (Postgres): replicas register, hold leases and
   * take the start-up lock there. A SQLite file belongs to the one process that opened it.
   */
  readonly sharedAcrossHosts: boolean
  /** Bound parameters allowed in one statement (batch inserts are sized from it). */
  readonly maxBindParameters: number
}

export type NotifyHandler = (payload: string) => void

export type ListenState = 'lost' | 'restored'

/** A column of a bulk insert: its name and the Postgres type its values are cast to. */
export interface BulkColumn {
  readonly name: string
  readonly pgType: 'text' | 'uuid' | 'bigint' | 'integer' | 'jsonb'
}

/** What `selectArrays` hands a read's result to. */
export interface ArrayVisitor {
  begin(columns: readonly string[]): void
  row(values: readonly unknown[]): void
}

export interface StoreDialect {
  readonly name: DialectName
  readonly capabilities: DialectCapabilities
  readonly db: Kysely<Database>
  /** Publishes to every listener of `channel` (other processes too where the dialect can). */
  notify(channel: string, payload: string): Promise<void>
  /** Subscribes to `channel`; resolves once listening; the returned function unsubscribes. */
  listen(channel: string, handler: NotifyHandler): Promise<() => Promise<void>>
  /**
   * Calls `cb('lost')` whenever the notify connection was lost (Postgres LISTEN) — notifications
   * sent until it is back are gone, so live consumers must catch up from the tables — and
   * `cb('restored')` once it listens again. Never on SQLite.
   */
  onListenGap?(cb: (state: ListenState) => void): () => void
  /** true when the JSON object in `column` has the top-level key `key` (false, never NULL, when the column is NULL). */
  jsonHasKey(column: string, key: string): RawBuilder<boolean>
  /** true when `column` holds a JSON object with at least one key. */
  jsonNonEmpty(column: string): RawBuilder<boolean>
  /** The number at `path` inside the JSON object in `column`, or NULL when absent or not a number. */
  jsonNumber(column: string, path: readonly string[]): RawBuilder<number | null>
  /**
   * The fast path for append-heavy tables (the audit log): inserts `rows` (values in `columns`
   * order) in one transaction, skipping rows whose `key` already exists, and returns the keys that
   * were inserted. SQLite: one prepared statement reused per row, run by a worker thread with its
   * own connection (src/store/dialects/sqlite-bulk-worker.ts); Postgres: one statement over
   * unnest() arrays. Must not be called inside a Kysely transaction.
   */
  insertIgnoreMany(table: string, columns: readonly BulkColumn[], rows: readonly unknown[][], key: string): Promise<string[]>
  /**
   * The same, from records each a JSON object keyed by column name (the audit writer's journal
   * lines), parsed by the database (Postgres: joined into one array for json_populate_recordset;
   * SQLite: each parsed on the bulk worker's thread). The strings travel as they are, where rows
   * of values cost the main thread an escaping pass (Postgres) or a structured clone (the SQLite
   * worker) of every value.
   */
  insertJsonRecords(table: string, columns: readonly BulkColumn[], records: readonly string[], key: string): Promise<string[]>
  /**
   * A read whose rows are handed to `visit` as arrays of values in the result's column order, the
   * driver's values as an object read gives them, without an object per row (for reads of
   * thousands of wide rows). `begin` gets the columns' names before the first row, and again if
   * the read starts over (what came before it is to be dropped); a row's array is valid only
   * during its call (SQLite hands rows on as it steps, none kept). `text` and `parameters` as
   * Kysely compiles them. On the store's own connections: never inside a transaction.
   */
  selectArrays(text: string, parameters: readonly unknown[], visit: ArrayVisitor): Promise<void>
  /**
   * Postgres only: a session advisory lock named `name` held on a connection of its own until the
   * returned function releases it (or the process dies); null when held elsewhere in a conflicting mode.
   * `onLost`: called once when the lock's connection ends without a release (the lock is gone).
   */
  holdLock?(name: string, mode: 'exclusive' | 'shared', onLost?: (err?: Error) => void): Promise<(() => Promise<void>) | null>
  close(): Promise<void>
}

/** Notify channels are SQL identifiers on Postgres; the same rule everywhere keeps them portable. */
export function assertChannel(channel: string): void {
  if (!/^[a-z][a-z0-9_]{0,40}$/.test(channel)) throw new TypeError(`invalid notify channel name: ${channel}`)
}
