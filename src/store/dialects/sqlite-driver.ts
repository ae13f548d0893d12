// Kysely's SQLite driver over a better-sqlite3 connection that never sleeps on a lock. Every
// statement runs synchronously on the thread that owns the connection (serve's and `corral
// proxy`'s event loop); with a busy timeout, a write that finds the write lock held by another
// connection (the audit bulk worker's insert, the provable log's append transaction, an admin
// CLI) would sleep in SQLite's busy handler, and every request of the process would wait with it.
// So the connection runs with no busy timeout: a statement that cannot get its lock fails at once
// with nothing done, and the driver waits on a timer (the event loop runs meanwhile, and so do
// this store's other queries) and runs it again, within the same bound the busy timeout gave.
import type BetterSqlite3 from 'better-sqlite3'
import { CompiledQuery, SqliteDialect, SqliteDriver, type DatabaseConnection, type Driver, type QueryResult } from 'kysely'

/** How long a statement waits for a lock another connection holds before its SQLITE_BUSY is thrown. */
export const SQLITE_LOCK_WAIT_MS = 5_000
/** Pauses between attempts (the last repeats): short at first, as an append or a group commit is. */
const PAUSES_MS = [1, 2, 4, 8, 16, 25]

/** SQLITE_BUSY and its extended codes (…_RECOVERY, …_SNAPSHOT, …_TIMEOUT): the statement did nothing. */
export function isSqliteBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY')
}

/**
 * Runs `attempt` until it does not fail with SQLITE_BUSY, waiting on a timer between attempts as
 * the driver's statements do, within the same bound. For statements run on the connection outside
 * the driver (which must not be inside a transaction: a busy statement there fails it).
 */
export async function whenNotBusy<T>(attempt: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + SQLITE_LOCK_WAIT_MS
  for (let i = 0; ; i++) {
    try {
      return await attempt()
    } catch (err) {
      if (!isSqliteBusy(err) || Date.now() >= deadline) throw err
      const ms = Math.min(PAUSES_MS[Math.min(i, PAUSES_MS.length - 1)]!, Math.max(1, deadline - Date.now()))
      await new Promise((resolve) => setTimeout(resolve, ms))
    }
  }
}

/**
 * Transactions BEGIN IMMEDIATE: Kysely's BEGIN DEFERRED transaction that reads and then writes
 * while another connection committed in between cannot upgrade its snapshot and fails at once;
 * taking the write lock up front makes it wait for the lock instead (here, on a timer).
 */
export class LockWaitingSqliteDialect extends SqliteDialect {
  readonly #database: BetterSqlite3.Database

  constructor(database: BetterSqlite3.Database) {
    super({ database })
    this.#database = database
  }

  override createDriver(): Driver {
    return new LockWaitingSqliteDriver(this.#database)
  }
}

class LockWaitingSqliteDriver extends SqliteDriver {
  readonly #database: BetterSqlite3.Database
  #connection: DatabaseConnection | undefined

  constructor(database: BetterSqlite3.Database) {
    super({ database })
    this.#database = database
  }

  override async acquireConnection(): Promise<DatabaseConnection> {
    const inner = await super.acquireConnection()
    this.#connection ??= new LockWaitingConnection(inner, this.#database, async (ms) => {
      // The connection is given up while waiting: this store's other queries are not held behind a lock it does not have.
      await this.releaseConnection()
      await new Promise((resolve) => setTimeout(resolve, ms))
      await super.acquireConnection()
    })
    return this.#connection
  }

  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'))
  }
}

class LockWaitingConnection implements DatabaseConnection {
  constructor(
    readonly inner: DatabaseConnection,
    readonly database: BetterSqlite3.Database,
    readonly pause: (ms: number) => Promise<void>,
  ) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const deadline = Date.now() + SQLITE_LOCK_WAIT_MS
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.inner.executeQuery<R>(query)
      } catch (err) {
        // Inside a transaction this connection already holds the write lock (BEGIN IMMEDIATE), so a
        // busy statement there is not a wait for a lock; it fails the transaction as it always did.
        if (!isSqliteBusy(err) || this.database.inTransaction || Date.now() >= deadline) throw err
        await this.pause(Math.min(PAUSES_MS[Math.min(attempt, PAUSES_MS.length - 1)]!, Math.max(1, deadline - Date.now())))
      }
    }
  }

  streamQuery<R>(query: CompiledQuery, chunkSize?: number): AsyncIterableIterator<QueryResult<R>> {
    return this.inner.streamQuery<R>(query, chunkSize)
  }
}
