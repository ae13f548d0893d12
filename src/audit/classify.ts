// Is a failed insert the database's fault (retry the same batch later) or the batch's (split it
// until the one refused event is found, and quarantine that event)? Getting this wrong either way
// is costly: a transient fault treated as bad data would quarantine healthy events while the
// database restarts; bad data treated as transient blocks every later row (the bug this replaces).
//
// transient: the database is unreachable, restarting, out of resources or busy
//   Postgres SQLSTATE classes 08 (connection), 53 (insufficient resources), 57 (operator
//   intervention: admin shutdown, cannot connect now), 58 (system / I/O error), 40 (serialization,
//   deadlock), 55P03 (lock not available); socket errors; pg's pool and connection messages.
//   SQLite BUSY, LOCKED, FULL, IOERR, CANTOPEN, READONLY, NOMEM, PROTOCOL, INTERRUPT, CORRUPT/NOTADB
//   (better to retry and keep the events in the journal than to quarantine everything).
// data: anything else, e.g. class 22 (data exception: invalid json, NUL), 23 (constraints),
//   54 (program limit: nesting too deep), SQLite CONSTRAINT, TOOBIG, MISMATCH, RANGE, a TypeError
//   from the driver. A lone event that fails with a data error is quarantined; the quarantine
//   insert itself succeeding is the proof that the database works.

export type FailureKind = 'transient' | 'data'

const TRANSIENT_PG_CLASSES = new Set(['08', '53', '57', '58', '40'])
const TRANSIENT_PG_CODES = new Set(['55P03', '55006', 'XX001', 'XX002'])
const TRANSIENT_SQLITE = /^SQLITE_(BUSY|LOCKED|FULL|IOERR|CANTOPEN|READONLY|NOMEM|PROTOCOL|INTERRUPT|CORRUPT|NOTADB|NOLFS|AUTH|WORKER_LOST|MISUSE)/
const TRANSIENT_SOCKET = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH',
  'ECONNABORTED', 'ENOENT', 'EACCES', 'ENOSPC', 'EIO', 'EMFILE', 'ENFILE',
])
const TRANSIENT_MESSAGE =
  /connection terminated|timeout exceeded when trying to connect|connection (?:is )?(?:closed|ended|refused)|client has encountered a connection error|cannot use a pool after calling end|the database connection is not open|terminating connection|audit worker/i

export function classifyFailure(err: unknown): FailureKind {
  const e = err as { code?: unknown; message?: unknown } | undefined
  const code = typeof e?.code === 'string' ? e.code : ''
  if (/^[0-9A-Z]{5}$/.test(code) && !code.startsWith('SQLITE')) {
    return TRANSIENT_PG_CLASSES.has(code.slice(0, 2)) || TRANSIENT_PG_CODES.has(code) ? 'transient' : 'data'
  }
  if (TRANSIENT_SQLITE.test(code)) return 'transient'
  if (TRANSIENT_SOCKET.has(code)) return 'transient'
  if (code.startsWith('SQLITE')) return 'data'
  const message = typeof e?.message === 'string' ? e.message : String(err)
  return TRANSIENT_MESSAGE.test(message) ? 'transient' : 'data'
}

/** One line for logs and the quarantine reason: the code and the message, bounded. */
export function describeFailure(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown } | undefined
  const message = typeof e?.message === 'string' ? e.message : String(err)
  const code = typeof e?.code === 'string' ? `${e.code}: ` : ''
  return `${code}${message}`.slice(0, 500)
}
