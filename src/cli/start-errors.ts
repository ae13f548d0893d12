// Why `serve` / `dev` could not start, said in one line with what to do: a port somebody else
// holds, a data dir another serve holds, a database that cannot be reached or refuses us. Anything else keeps its own message.
import { CliError } from './errors.js'

export interface StartContext {
  /** Which flag sets each port we may bind, by port number, e.g. 7070 → '--port'. */
  readonly ports: ReadonlyMap<number, string>
  readonly dataDir: string
  /** The store URL as given (a password in it is never shown). */
  readonly db?: string
}

export function explainStartError(err: unknown, ctx: StartContext): CliError | undefined {
  const chain = causes(err)
  // Another serve (or dev) holds the data dir (src/serve/data-dir-lock.ts): its message is the line.
  const locked = chain.find((e) => e.code === 'CORRAL_DATA_DIR_LOCKED')
  if (locked) return new CliError(locked.message, 'data_dir_locked')
  const inUse = chain.find((e) => e.code === 'EADDRINUSE' || (e.code === 'EACCES' && e.syscall === 'listen'))
  if (inUse) {
    const port = Number(inUse.port ?? /:(\d+)\s*$/.exec(inUse.message)?.[1])
    const flag = ctx.ports.get(port) ?? 'the port flags'
    const what = inUse.code === 'EACCES' ? `may not listen on port ${port}` : `port ${port} is already in use`
    return new CliError(`${what} (${flag}): another corral serve or dev is probably running; stop it, or pass ${flag} with a free port (--port 0 picks free ports for everything)`, 'port_in_use')
  }
  const db = describeDb(ctx)
  const reach = chain.find((e) => ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH'].includes(String(e.code)))
  if (reach) return new CliError(`cannot reach the database ${db} (${reach.code}): check --db / CORRAL_DB_URL, or leave it unset for SQLite under ${ctx.dataDir}`, 'database_unreachable')
  const pg = chain.find((e) => PG_CODES[String(e.code)])
  if (pg) return new CliError(`the database ${db} refused us: ${PG_CODES[String(pg.code)]} (${pg.message}); check --db / CORRAL_DB_URL`, 'database_refused')
  const sqlite = chain.find((e) => String(e.code).startsWith('SQLITE_CANTOPEN') || e.code === 'EACCES' || e.code === 'ENOENT')
  if (sqlite && !ctx.db?.startsWith('postgres')) return new CliError(`cannot open the SQLite store ${db}: ${sqlite.message}; check --data-dir / --db`, 'database_unreachable')
  return undefined
}

/** PostgreSQL error classes a misconfigured URL produces (SQLSTATE → what it means). */
const PG_CODES: Record<string, string> = {
  '28P01': 'wrong password',
  '28000': 'the user may not connect',
  '3D000': 'the database does not exist',
  '42501': 'the user lacks privileges to create the schema',
}

function describeDb(ctx: StartContext): string {
  if (!ctx.db) return `sqlite under ${ctx.dataDir}`
  return ctx.db.replace(/\/\/([^@/:]*)(:[^@/]*)?@/, '//$1@')
}

interface ErrLike { code?: unknown; port?: unknown; syscall?: unknown; message: string }

function causes(err: unknown): ErrLike[] {
  const out: ErrLike[] = []
  let e: unknown = err
  for (let depth = 0; e && typeof e === 'object' && depth < 8; depth++) {
    out.push(e as ErrLike)
    // AggregateError (a dual-stack connect) holds the real reasons in `errors`.
    for (const inner of (e as { errors?: unknown[] }).errors ?? []) if (inner && typeof inner === 'object') out.push(inner as ErrLike)
    e = (e as { cause?: unknown }).cause
  }
  return out
}
