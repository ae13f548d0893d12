// The audit_events table: idempotent batch inserts, and the executors for the page and stats
// queries that src/audit parses and validates. Only SQL lives here; the query grammar, cursor
// encoding and permissions narrowing are src/audit's.

import { sql, type Expression, type Kysely, type ExpressionBuilder, type RawBuilder, type SelectQueryBuilder, type SqlBool } from 'kysely'
import type { AuditEvent, AuditFilterClause, FilterColumn } from '../../contract/index.js'
import type { BulkColumn, StoreDialect } from '../dialects/types.js'
import type { AuditEventsTable, Database } from '../schema.js'
import type { RepoContext } from './context.js'

import { AUDIT_INT_COLUMNS, AUDIT_JSON_COLUMNS, AUDIT_TEXT_COLUMNS, epochMs, isUuid } from './audit-columns.js'
import { createAuditQuarantineMethods } from './audit-quarantine.js'

export { AUDIT_INT_COLUMNS, AUDIT_JSON_COLUMNS, AUDIT_ROW_COLUMNS, AUDIT_TEXT_COLUMNS, isUuid } from './audit-columns.js'
export type { QuarantinedEvent, QuarantineInsert } from './audit-quarantine.js'
const COLUMN_COUNT = 8 + AUDIT_TEXT_COLUMNS.length + AUDIT_INT_COLUMNS.length + AUDIT_JSON_COLUMNS.length

/** Every column with its Postgres type, for the bulk insert path. */
const BULK_COLUMNS: readonly BulkColumn[] = [
  { name: 'id', pgType: 'uuid' },
  ...['org_id', 'user_id', 'timestamp'].map((name) => ({ name, pgType: 'text' as const })),
  { name: 'ts', pgType: 'bigint' },
  ...['event_type', 'category', 'actor', ...AUDIT_TEXT_COLUMNS].map((name) => ({ name, pgType: 'text' as const })),
  ...AUDIT_INT_COLUMNS.map((name) => ({ name, pgType: 'integer' as const })),
  ...AUDIT_JSON_COLUMNS.map((name) => ({ name, pgType: 'jsonb' as const })),
]

/** Restrictions shared by pages and stats (all optional except the org, which is a parameter). */
export interface AuditWhere {
  filters: AuditFilterClause[]
  /** Inclusive lower bound, epoch ms. */
  fromMs?: number
  /** Exclusive upper bound, epoch ms. */
  toMs?: number
  /** `:own` narrowing. */
  userId?: string
  workspaceId?: string
}

export interface AuditPageQuery extends AuditWhere {
  order: 'asc' | 'desc'
  limit: number
  /** Keyset position: rows strictly after this (ts, id) in `order`. */
  after?: { ts: number; id: string }
}

/** A numeric value of a row: an integer column, or a number inside a JSON column. */
export type NumericPath =
  | { column: (typeof AUDIT_INT_COLUMNS)[number] }
  | { column: 'debits' | 'budget_state' | 'detail'; path: string[] }

export type StatsDimension = (typeof AUDIT_TEXT_COLUMNS)[number] | 'event_type' | 'category' | 'actor' | 'user_id'

export interface AuditStatsQuery extends AuditWhere {
  groupBy: StatsDimension[]
  timeBucketMs?: number
  bucketBy?: { value: NumericPath; bounds: number[] }
  metric: { fn: 'count' } | { fn: 'sum' | 'avg'; value: NumericPath }
  /** Restrict `dimension` to these values (the caller computed the top N first). */
  onlyValues?: { dimension: StatsDimension; values: string[] }
  /**
   * Keep only the `n` values of `dimension` (one of groupBy) with the largest metric over the
   * whole range, ranked like topValues(), computed in the same scan as the groups (one pass over
   * the rows instead of two). Not combinable with bucketBy, whose rows without a bucket value
   * are excluded from the groups but not from the ranking: use topValues() + onlyValues there.
   */
  top?: { dimension: StatsDimension; n: number }
  maxRows: number
}

export interface AuditStatsRow {
  group: string[]
  /** Time-bucket start (epoch ms) or range index into bucketBy.bounds (0 = below the first bound). */
  bucket?: number
  value: number
}

type AuditQB = SelectQueryBuilder<Database, 'audit_events', object>

export function createAuditRepository({ db, dialect }: RepoContext) {
  const chunkRows = Math.max(1, Math.floor(dialect.capabilities.maxBindParameters / COLUMN_COUNT))

  const numeric = (v: NumericPath): RawBuilder<number | null> =>
    'path' in v ? dialect.jsonNumber(v.column, v.path) : sql<number | null>`${sql.ref(v.column)}`

  const applyWhere = (qb: AuditQB, orgId: string, w: AuditWhere): AuditQB => {
    let q = qb.where('org_id', '=', orgId)
    if (w.workspaceId !== undefined) q = q.where('workspace_id', '=', w.workspaceId)
    if (w.userId !== undefined) q = q.where('user_id', '=', w.userId)
    if (w.fromMs !== undefined) q = q.where('ts', '>=', w.fromMs)
    if (w.toMs !== undefined) q = q.where('ts', '<', w.toMs)
    for (const f of w.filters) q = q.where((eb) => filterExpression(eb, dialect, f))
    return q
  }

  return {
    ...createAuditQuarantineMethods({ db, dialect }),
    /** Inserts rows, ignoring ids already stored (idempotent retries). Returns how many were new. */
    async insertBatch(events: readonly AuditEvent[]): Promise<number> {
      return (await this.insertBatchReturningIds(events)).length
    },

    /**
     * Like insertBatch, returning the ids that were new: a retried batch whose first attempt did
     * commit announces nothing twice on the live bus.
     */
    async insertBatchReturningIds(events: readonly AuditEvent[]): Promise<string[]> {
      if (events.length === 0) return []
      if (!db.isTransaction) {
        return dialect.insertIgnoreMany('audit_events', BULK_COLUMNS, events.map(toBulkRow), 'id')
      }
      const rows = events.map(toRow)
      const ids: string[] = []
      const insertAll = async (trx: typeof db) => {
        for (let i = 0; i < rows.length; i += chunkRows) {
          const res = await trx
            .insertInto('audit_events')
            .values(rows.slice(i, i + chunkRows) as never)
            .onConflict((oc) => oc.column('id').doNothing())
            .returning('id')
            .execute()
          for (const r of res) ids.push(String(r.id))
        }
      }
      // One transaction per batch: a batch commits whole (inside a Store transaction, as part of it).
      if (db.isTransaction) await insertAll(db)
      else await db.transaction().execute(insertAll)
      return ids
    },

    /**
     * Rows already encoded by the audit writer (values in AUDIT_ROW_COLUMNS order, JSON columns as
     * text): inserted in one transaction, ids already stored skipped; returns the ids that were new.
     */
    async insertEncodedReturningIds(rows: readonly unknown[][], lines?: readonly string[]): Promise<string[]> {
      if (rows.length === 0) return []
      // `lines`: the same events as JSON objects with every column (ts included), where the dialect can take them whole.
      if (lines && lines.length === rows.length && dialect.insertJsonRecords) {
        return dialect.insertJsonRecords('audit_events', BULK_COLUMNS, `[${lines.join(',')}]`, 'id')
      }
      return dialect.insertIgnoreMany('audit_events', BULK_COLUMNS, rows, 'id')
    },

    async getById(orgId: string, id: string): Promise<AuditEvent | undefined> {
      if (!isUuid(id)) return undefined
      const row = await db.selectFrom('audit_events').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst()
      return row && fromRow(row)
    },

    /** Rows by id across orgs, in (ts, id) order: the live bus resolves notifications with it. */
    async listByIds(ids: readonly string[]): Promise<AuditEvent[]> {
      const valid = ids.filter(isUuid)
      if (valid.length === 0) return []
      const rows = await db.selectFrom('audit_events').selectAll().where('id', 'in', valid).orderBy('ts').orderBy('id').execute()
      return rows.map(fromRow)
    },

    /** The (ts, id) position of one event of the org, for keyset resumption (Last-Event-ID). */
    async positionOf(orgId: string, id: string): Promise<{ ts: number; id: string } | undefined> {
      if (!isUuid(id)) return undefined
      const row = await db.selectFrom('audit_events').select(['ts', 'id']).where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst()
      return row && { ts: Number(row.ts), id: String(row.id) }
    },

    /** One keyset page in (ts, id) order. */
    async page(orgId: string, q: AuditPageQuery): Promise<AuditEvent[]> {
      let qb = applyWhere(db.selectFrom('audit_events'), orgId, q)
      if (q.after) {
        const { ts, id } = q.after
        qb = qb.where((eb) => eb(eb.refTuple('ts', 'id'), q.order === 'asc' ? '>' : '<', eb.tuple(ts, id)))
      }
      const rows = await qb.selectAll().orderBy('ts', q.order).orderBy('id', q.order).limit(q.limit).execute()
      return rows.map(fromRow)
    },

    /** Earliest matching timestamp (epoch ms): `time_bucket=auto` without `from` sizes buckets from it. */
    async minTs(orgId: string, w: AuditWhere): Promise<number | undefined> {
      const row = await applyWhere(db.selectFrom('audit_events'), orgId, w)
        .select((eb) => eb.fn.min('ts').as('m'))
        .executeTakeFirst()
      return row?.m === null || row?.m === undefined ? undefined : Number(row.m)
    },

    /** Grouped aggregate rows. */
    async stats(orgId: string, q: AuditStatsQuery): Promise<AuditStatsRow[]> {
      const metricValue = q.metric.fn === 'count' ? undefined : numeric(q.metric.value)
      const bucketValue = q.bucketBy ? numeric(q.bucketBy.value) : undefined
      const topIndex = q.top ? q.groupBy.indexOf(q.top.dimension) : -1
      if (q.top && (topIndex < 0 || q.bucketBy)) throw new TypeError('stats top: the dimension must be grouped, and bucketBy uses topValues() + onlyValues')
      if (q.onlyValues?.values.length === 0) return []
      // Two levels: an inner query computes each row's group values, bucket and metric value
      // (r.g0…, r.b or r.bv, r.m); the outer query aggregates them. On SQLite, when a value comes
      // from a JSON column, the inner query carries LIMIT -1 so the planner does not flatten it
      // back: it runs as a co-routine and each row's JSON path is evaluated once instead of in
      // every aggregate and CASE branch (four or more lookups per row for sum; measured ~40% faster
      // at 1M rows). Otherwise both planners flatten it into the plain grouped query. (An OFFSET 0
      // fence on Postgres showed no gain in the 1M bench and rules out parallel aggregation.)
      let inner = applyWhere(db.selectFrom('audit_events'), orgId, q)
      if (q.onlyValues) {
        const { dimension, values } = q.onlyValues
        inner = inner.where(sql<SqlBool>`COALESCE(${sql.ref(dimension)}, '') IN (${sql.join(values)})`)
      }
      const rowValues: RawBuilder<unknown>[] = q.groupBy.map((d, i) => sql`COALESCE(${sql.ref(d)}, '')`.as(`g${i}`) as never)
      if (q.timeBucketMs !== undefined) {
        const size = sql.lit(q.timeBucketMs)
        rowValues.push(sql`((ts / ${size}) * ${size})`.as('b') as never)
      }
      if (bucketValue) rowValues.push(bucketValue.as('bv') as never)
      if (metricValue) rowValues.push(metricValue.as('m') as never)
      if (rowValues.length === 0) rowValues.push(sql`1`.as('one') as never)
      const innerSelect = inner.select(rowValues as never)
      const fromJson = (q.metric.fn !== 'count' && 'path' in q.metric.value) || (q.bucketBy !== undefined && 'path' in q.bucketBy.value)
      const fenced = dialect.name === 'sqlite' && fromJson ? innerSelect.limit(-1) : innerSelect

      const selections: RawBuilder<unknown>[] = q.groupBy.map((_, i) => sql.ref(`r.g${i}`).as(`g${i}`) as never)
      const groupKeys = q.groupBy.map((_, i) => sql.ref(`g${i}`))
      const m = sql.ref('r.m')
      if (q.timeBucketMs !== undefined) {
        selections.push(sql.ref('r.b').as('b') as never)
        groupKeys.push(sql.ref('b'))
      } else if (q.bucketBy) {
        const bv = sql.ref('r.bv')
        const cases = q.bucketBy.bounds.map((b, i) => sql`WHEN ${bv} < ${sql.lit(b)} THEN ${sql.lit(i)}`)
        selections.push(sql`(CASE ${sql.join(cases, sql` `)} ELSE ${sql.lit(q.bucketBy.bounds.length)} END)`.as('b') as never)
        groupKeys.push(sql.ref('b'))
      }
      const metricSql = q.metric.fn === 'count' ? sql`count(*)` : q.metric.fn === 'sum' ? sql`COALESCE(sum(${m}), 0)` : sql`avg(${m})`
      selections.push(metricSql.as('v') as never)
      // Rows without a metric value are kept (filtering them would be one more JSON lookup per
      // row): the aggregates ignore NULLs and `n` counts values, so empty groups drop out. Without
      // grouping, SQL returns one row even over no input; `n` lets us drop it too.
      selections.push((metricValue ? sql`count(${m})` : sql`count(*)`).as('n') as never)
      // avg ranks top values by sum/count over all of a value's groups.
      if (q.top && q.metric.fn === 'avg') selections.push(sql`sum(${m})`.as('s') as never)
      const hasBucket = q.timeBucketMs !== undefined || q.bucketBy !== undefined
      type Loose = SelectQueryBuilder<Record<string, Record<string, unknown>>, string, Record<string, unknown>>
      let query = (db as unknown as Kysely<Record<string, Record<string, unknown>>>)
        .selectFrom(fenced.as('r') as never)
        .select(selections as never) as unknown as Loose
      // Rows without a bucket value belong to no range.
      if (bucketValue) query = query.where(sql<SqlBool>`r.bv IS NOT NULL`)
      if (groupKeys.length > 0) query = query.groupBy(groupKeys as never)
      if (q.top) {
        // WITH g AS (the groups), t AS (the top n values of the dimension, ranked over g)
        // SELECT * FROM g WHERE dimension IN t: the rows are read once (topValues + onlyValues read them twice).
        const dim = sql.ref(`g${topIndex}`)
        const rank = q.metric.fn === 'avg' ? sql`(sum(s) * 1.0 / sum(n))` : sql`sum(v)`
        const grouped = query
        query = db
          .with('g', () => grouped as never)
          .with('t', (w) =>
            (w as unknown as Kysely<Record<string, Record<string, unknown>>>)
              .selectFrom('g')
              .select(dim.as('d') as never)
              .groupBy(dim as never)
              .having(sql<SqlBool>`sum(n) > 0`)
              .orderBy(rank as never, 'desc')
              .orderBy(dim as never)
              .limit(q.top!.n) as never,
          )
          .selectFrom('g' as never)
          .selectAll()
          .where(sql<SqlBool>`${dim} IN (SELECT d FROM t)`) as unknown as typeof query
      }
      // Time series read left to right; within a bucket the biggest groups first.
      if (hasBucket) query = query.orderBy(sql.ref('b'))
      query = query.orderBy(sql.ref('v'), 'desc')
      for (let i = 0; i < q.groupBy.length; i++) query = query.orderBy(sql.ref(`g${i}`))
      const rows = (await query.limit(q.maxRows).execute()) as Array<Record<string, unknown>>
      return rows.filter((r) => Number(r.n) > 0).map((r) => ({
        group: q.groupBy.map((_, i) => String(r[`g${i}`])),
        ...(hasBucket ? { bucket: Number(r.b) } : {}),
        value: Number(r.v),
      }))
    },

    /** The `n` values of `dimension` with the largest metric, for `top=N:dimension`. */
    async topValues(orgId: string, q: AuditStatsQuery, dimension: StatsDimension, n: number): Promise<string[]> {
      const metricValue = q.metric.fn === 'count' ? undefined : numeric(q.metric.value)
      const qb = applyWhere(db.selectFrom('audit_events'), orgId, q)
      const metricSql =
        q.metric.fn === 'count' ? sql`count(*)` : q.metric.fn === 'sum' ? sql`COALESCE(sum(${metricValue}), 0)` : sql`avg(${metricValue})`
      const rows = (await qb
        .select([sql`COALESCE(${sql.ref(dimension)}, '')`.as('d'), metricSql.as('v')] as never)
        .groupBy(sql.ref('d') as never)
        .$if(metricValue !== undefined, (b) => b.having(sql<SqlBool>`count(${metricValue}) > 0`))
        .orderBy(sql.ref('v'), 'desc')
        .orderBy(sql.ref('d'))
        .limit(n)
        .execute()) as Array<Record<string, unknown>>
      return rows.map((r) => String(r.d))
    },
  }
}
export type AuditRepository = ReturnType<typeof createAuditRepository>

function filterExpression(eb: ExpressionBuilder<Database, 'audit_events'>, dialect: StoreDialect, f: AuditFilterClause): Expression<SqlBool> {
  if (f.column === 'counter') {
    if (f.op === 'populated') return sql<SqlBool>`(${dialect.jsonNonEmpty('debits')} OR ${dialect.jsonNonEmpty('budget_state')})`
    const any = sql.join(
      f.values.map((k) => sql`(${dialect.jsonHasKey('debits', k)} OR ${dialect.jsonHasKey('budget_state', k)})`),
      sql` OR `,
    )
    return f.op === 'in' ? sql<SqlBool>`(${any})` : sql<SqlBool>`NOT (${any})`
  }
  const col = f.column
  if (f.op === 'populated') return eb.and([eb(col, 'is not', null), eb(col, '<>', '')])
  if (f.op === 'in') return eb(col, 'in', f.values)
  // not-in keeps rows where the column is absent: their value is not one of the listed ones.
  return eb.or([eb(col, 'is', null), eb(col, 'not in', f.values)])
}


type InsertRow = { [K in keyof AuditEventsTable]?: unknown }

function toRow(e: AuditEvent): InsertRow {
  const row: InsertRow = {
    id: e.id,
    org_id: e.org_id,
    user_id: e.user_id,
    timestamp: e.timestamp,
    ts: Date.parse(e.timestamp),
    event_type: e.event_type,
    category: e.category,
    actor: e.actor,
  }
  for (const c of AUDIT_TEXT_COLUMNS) row[c] = e[c] ?? null
  for (const c of AUDIT_INT_COLUMNS) row[c] = e[c] ?? null
  for (const c of AUDIT_JSON_COLUMNS) row[c] = e[c] === undefined || e[c] === null ? null : JSON.stringify(e[c])
  return row
}

const BULK_TEXT = ['org_id', 'user_id', 'timestamp'] as const
const BULK_TEXT2 = ['event_type', 'category', 'actor', ...AUDIT_TEXT_COLUMNS] as const


/** One event as values in BULK_COLUMNS order (the ingest hot path: no intermediate object). */
function toBulkRow(e: AuditEvent): unknown[] {
  const r: unknown[] = [e.id]
  for (const c of BULK_TEXT) r.push(e[c])
  r.push(epochMs(e.timestamp))
  for (const c of BULK_TEXT2) r.push(e[c] ?? null)
  for (const c of AUDIT_INT_COLUMNS) r.push(e[c] ?? null)
  for (const c of AUDIT_JSON_COLUMNS) {
    const v = e[c]
    r.push(v === undefined || v === null ? null : JSON.stringify(v))
  }
  return r
}

function fromRow(row: Record<string, unknown>): AuditEvent {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(row)) {
    if (v === null || v === undefined || k === 'ts') continue
    if ((AUDIT_JSON_COLUMNS as readonly string[]).includes(k)) out[k] = typeof v === 'string' ? JSON.parse(v) : v
    else if ((AUDIT_INT_COLUMNS as readonly string[]).includes(k)) out[k] = Number(v)
    else out[k] = typeof v === 'string' ? v : String(v)
  }
  return out as unknown as AuditEvent
}
