// Postgres through a pg Pool. An optional schema isolates one store from others in the same
// database (parallel test suites): every pooled connection gets it as search_path, and notify
// channels are namespaced with it. LISTEN needs one dedicated connection; it reconnects with
// backoff and re-subscribes when the connection drops.

import pg from 'pg'
import { Kysely, PostgresDialect, sql } from 'kysely'
import type { Database } from '../schema.js'
import { storeTypes } from './pg-types.js'
import { assertChannel, type BulkColumn, type ListenState, type NotifyHandler, type StoreDialect } from './types.js'

const types = storeTypes(pg)

/** jsonb values are limited to 256 MiB; characters can take up to 4 bytes (a quarter, with room). */
const JSONB_MAX_CHARS = 48 << 20

export interface PostgresOptions {
  schema?: string
  max?: number
}

export async function openPostgres(url: string, opts: PostgresOptions = {}): Promise<StoreDialect> {
  const schema = opts.schema
  if (schema !== undefined && !/^[a-z_][a-z0-9_]{0,40}$/.test(schema)) throw new TypeError(`invalid schema name: ${schema}`)
  const base: pg.ClientConfig = { connectionString: url, types }
  if (schema) await createSchema(base, schema)
  const pool = createPool(base, opts.max ?? 10, schema)
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) })
  const prefix = schema ? `${schema}__` : ''
  // Named so operators (and tests) can tell the LISTEN connection apart in pg_stat_activity.
  const listener = new Listener({ ...base, application_name: schema ? `corral-listen:${schema}` : 'corral-listen' })

  return {
    name: 'postgres',
    capabilities: { rowLocks: true, crossProcessNotify: true, sharedAcrossHosts: true, maxBindParameters: 65_535 },
    db,
    async notify(channel, payload) {
      assertChannel(channel)
      await sql`SELECT pg_notify(${prefix + channel}, ${payload})`.execute(db)
    },
    async listen(channel, handler) {
      assertChannel(channel)
      return listener.add(prefix + channel, handler)
    },
    onListenGap: (cb) => listener.onGap(cb),
    jsonHasKey(column, key) {
      return sql<boolean>`COALESCE(${sql.ref(column)} ? ${key}, false)`
    },
    jsonNonEmpty(column) {
      return sql<boolean>`(${sql.ref(column)} IS NOT NULL AND ${sql.ref(column)} <> '{}'::jsonb AND ${sql.ref(column)} <> '[]'::jsonb)`
    },
    jsonNumber(column, path) {
      const p = `{${path.map((k) => JSON.stringify(k)).join(',')}}`
      return sql<number | null>`(CASE WHEN jsonb_typeof(${sql.ref(column)} #> ${p}::text[]) = 'number' THEN (${sql.ref(column)} #>> ${p}::text[])::float8 END)`
    },
    async insertIgnoreMany(table: string, columns: readonly BulkColumn[], rows: readonly unknown[][], key: string) {
      if (rows.length === 0) return []
      // One statement whatever the row count: each column travels as one array parameter. JSON
      // travels as text and is cast per element, since a jsonb[] literal would need its own escaping.
      const arrays = columns.map((_, i) => rows.map((r) => r[i] ?? null))
      const unnestArgs = columns.map((c, i) => `$${i + 1}::${c.pgType === 'jsonb' ? 'text' : c.pgType}[]`).join(', ')
      const select = columns.map((c, i) => (c.pgType === 'jsonb' ? `u.c${i}::jsonb` : `u.c${i}`)).join(', ')
      const text =
        `INSERT INTO "${table}" (${columns.map((c) => `"${c.name}"`).join(', ')}) ` +
        `SELECT ${select} FROM unnest(${unnestArgs}) AS u(${columns.map((_, i) => `c${i}`).join(', ')}) ` +
        `ON CONFLICT ("${key}") DO NOTHING RETURNING "${key}"`
      const res = await pool.query<Record<string, unknown>>(text, arrays)
      return res.rows.map((r) => String(r[key]))
    },
    async insertJsonRecords(table: string, columns: readonly BulkColumn[], records: readonly string[], key: string) {
      const json = `[${records.join(',')}]`
      const names = columns.map((c) => `"${c.name}"`).join(', ')
      const select = columns.map((c) => `r."${c.name}"`).join(', ')
      // jsonb: the text is parsed once and each jsonb column takes its value as parsed, where the
      // json form re-parsed every nested value (about a third of the server's CPU per row). A
      // text past jsonb's size limit goes the json way.
      const type = json.length < JSONB_MAX_CHARS ? 'jsonb' : 'json'
      const text =
        `INSERT INTO "${table}" (${names}) SELECT ${select} FROM ${type}_populate_recordset(NULL::"${table}", $1::${type}) AS r ` +
        `ON CONFLICT ("${key}") DO NOTHING RETURNING "${key}"`
      const res = await pool.query<Record<string, unknown>>(text, [json])
      return res.rows.map((r) => String(r[key]))
    },
    async selectArrays(text, parameters, visit) {
      const res = await pool.query<unknown[]>({ text, values: [...parameters], rowMode: 'array' })
      visit.begin(res.fields.map((f) => f.name))
      for (const values of res.rows) visit.row(values)
    },
    async holdLock(name, mode, onLost) {
      return holdAdvisoryLock(base, prefix + name, mode, onLost)
    },
    async close() {
      await listener.close()
      await db.destroy()
    },
  }
}

/**
 * A session-level advisory lock on a connection of its own, held until released (or the
 * connection ends, e.g. the process dies); null when another session holds it in a conflicting mode.
 * `onLost` is called once when the connection ends without a release (the server restarted, the
 * backend was terminated): the lock is gone then.
 */
async function holdAdvisoryLock(base: pg.ClientConfig, name: string, mode: 'exclusive' | 'shared', onLost?: (err?: Error) => void): Promise<(() => Promise<void>) | null> {
  const client = new pg.Client({ ...base, application_name: 'corral-replica-lock' })
  let held = false
  let lostErr: Error | undefined
  const lost = (err?: Error) => {
    lostErr ??= err
    if (!held) return
    held = false
    onLost?.(lostErr)
  }
  client.on('error', (err) => lost(err))
  client.on('end', () => lost())
  await client.connect()
  try {
    const fn = mode === 'shared' ? 'pg_try_advisory_lock_shared' : 'pg_try_advisory_lock'
    const res = await client.query<{ ok: boolean }>(`SELECT ${fn}(hashtext($1)) AS ok`, [name])
    if (res.rows[0]?.ok) {
      held = true
      return () => {
        held = false
        return client.end().catch(() => {})
      }
    }
  } catch (err) {
    await client.end().catch(() => {})
    throw err
  }
  await client.end().catch(() => {})
  return null
}

/** Creates `schema` when missing (several processes may race to create it). */
async function createSchema(base: pg.ClientConfig, schema: string): Promise<void> {
  const admin = new pg.Client(base)
  await admin.connect()
  try {
    await admin.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`)
  } catch (err) {
    // Two processes creating the same schema at once: the loser sees a unique violation; the schema exists.
    if ((err as { code?: string }).code !== '23505') throw err
  } finally {
    await admin.end()
  }
}

function createPool(base: pg.ClientConfig, max: number, schema: string | undefined): pg.Pool {
  const pool = new pg.Pool({
    ...base,
    max,
    // A database that stalls (or a host that drops packets) fails a checkout after 5 s instead of
    // queueing requests forever; keep-alive finds a dead peer on an idle connection.
    connectionTimeoutMillis: 5_000,
    keepAlive: true,
    ...(schema ? { options: `-c search_path="${schema}"` } : {}),
  })
  // An idle pooled client that loses its connection emits 'error' on the pool; without a listener
  // that would crash the process. The next checkout simply gets a fresh connection.
  pool.on('error', () => {})
  // pg-pool detaches that listener while a client is checked out (Kysely holds one per query or
  // transaction), so a database restart mid-query would emit 'error' on a client nobody listens
  // to and crash the process. The query itself still fails (and the API answers 503); the pool
  // drops the broken client when it is released.
  pool.on('connect', (client) => client.on('error', () => {}))
  return pool
}

/** One LISTEN connection shared by every channel of this store. */
class Listener {
  readonly #config: pg.ClientConfig
  readonly #handlers = new Map<string, Set<NotifyHandler>>()
  #client: pg.Client | undefined
  #connecting: Promise<pg.Client> | undefined
  #closed = false
  #retryTimer: NodeJS.Timeout | undefined
  readonly #gapHandlers = new Set<(state: ListenState) => void>()

  constructor(config: pg.ClientConfig) {
    this.#config = config
  }

  async add(channel: string, handler: NotifyHandler): Promise<() => Promise<void>> {
    let set = this.#handlers.get(channel)
    const first = !set
    if (!set) {
      set = new Set()
      this.#handlers.set(channel, set)
    }
    set.add(handler)
    const client = await this.#connect()
    if (first) await client.query(`LISTEN "${channel}"`)
    return async () => {
      const current = this.#handlers.get(channel)
      if (!current?.delete(handler) || current.size > 0) return
      this.#handlers.delete(channel)
      if (this.#client && !this.#closed) await this.#client.query(`UNLISTEN "${channel}"`).catch(() => {})
    }
  }

  onGap(cb: (state: ListenState) => void): () => void {
    this.#gapHandlers.add(cb)
    return () => void this.#gapHandlers.delete(cb)
  }

  #connect(): Promise<pg.Client> {
    if (this.#client) return Promise.resolve(this.#client)
    this.#connecting ??= (async () => {
      const client = new pg.Client(this.#config)
      client.on('notification', (msg) => {
        for (const h of this.#handlers.get(msg.channel) ?? []) h(msg.payload ?? '')
      })
      client.on('error', () => this.#lost(client))
      client.on('end', () => this.#lost(client))
      await client.connect()
      for (const channel of this.#handlers.keys()) await client.query(`LISTEN "${channel}"`)
      this.#client = client
      return client
    })().finally(() => {
      this.#connecting = undefined
    })
    return this.#connecting
  }

  #lost(client: pg.Client): void {
    if (this.#client !== client) return
    this.#client = undefined
    client.end().catch(() => {})
    if (this.#closed) return
    // NOTIFYs sent until we are listening again are lost for good: tell the consumers at once.
    this.#announce('lost')
    // Capped at 2 s: live streams are refused while we are not listening, so be back promptly.
    const retry = (delay: number) => {
      this.#retryTimer = setTimeout(() => {
        this.#connect().then(
          () => this.#announce('restored'),
          () => retry(Math.min(delay * 2, 2_000)),
        )
      }, delay)
      this.#retryTimer.unref()
    }
    retry(250)
  }

  #announce(state: ListenState): void {
    for (const cb of [...this.#gapHandlers]) {
      try {
        cb(state)
      } catch {
        // a consumer's failure must not stop the reconnect
      }
    }
  }

  async close(): Promise<void> {
    this.#closed = true
    clearTimeout(this.#retryTimer)
    const client = this.#client ?? (await this.#connecting?.catch(() => undefined))
    this.#client = undefined
    await client?.end().catch(() => {})
  }
}
