// Which store errors mean "the database is not there right now" rather than "this request is
// wrong" or "our bug": the API answers those with 503 + Retry-After and recovers by itself once
// the database is back (nothing is cached broken: pg's pool drops dead clients, SQLite retries
// the file on the next statement). Both dialects' vocabularies live here, nowhere else.

// PostgreSQL SQLSTATE classes/codes: 08 connection exception, 57P01-03 admin/crash shutdown and
// "cannot connect now" (starting up, recovering), 53 insufficient resources (disk full, out of
// memory, too many connections), 58 system error (I/O), 40001/40P01 never (a retry is the caller's).
const PG_UNAVAILABLE = /^(08|53|58|57P0[123])/
// Node socket errors of the pg driver reaching a database that is down or unreachable.
const NET_UNAVAILABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN'])
// pg raises these as plain Errors without a code.
const PG_MESSAGES = /Connection terminated|connection error and is not queryable|timeout exceeded when trying to connect|Client was closed and is not queryable|terminating connection/i
// SQLite result codes (better-sqlite3 puts the extended code in `code`): locked past busy_timeout,
// disk full, I/O errors, the file turned read-only or unopenable.
const SQLITE_UNAVAILABLE = /^SQLITE_(BUSY|LOCKED|FULL|IOERR|READONLY|CANTOPEN|PROTOCOL|NOMEM)/

/** true when `err` (or its cause) says the store is unreachable, full or locked — retry later. */
export function isStoreUnavailable(err: unknown): boolean {
  for (let e = err, depth = 0; e && typeof e === 'object' && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const { code, message } = e as { code?: unknown; message?: unknown }
    if (typeof code === 'string' && (NET_UNAVAILABLE.has(code) || SQLITE_UNAVAILABLE.test(code) || (/^[0-9A-Z]{5}$/.test(code) && PG_UNAVAILABLE.test(code)))) return true
    if (typeof message === 'string' && PG_MESSAGES.test(message)) return true
  }
  return false
}
