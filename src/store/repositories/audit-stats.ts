// The executor of GET /v1/audit/stats (src/audit/stats.ts parses and validates the query): grouped
// aggregates over the audit rows, by dimension, time bucket or value range, optionally the top N.
import { sql, type Kysely, type RawBuilder, type SelectQueryBuilder, type SqlBool } from 'kysely'
import type { StoreDialect } from '../dialects/types.js'
import type { Database } from '../schema.js'
import type { AUDIT_INT_COLUMNS, AUDIT_TEXT_COLUMNS } from './audit-columns.js'
import { whereAudit, type AuditWhere } from './audit-where.js'

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

function numeric(dialect: StoreDialect, v: NumericPath): RawBuilder<number | null> {
  return 'path' in v ? dialect.jsonNumber(v.column, v.path) : sql<number | null>`${sql.ref(v.column)}`
}

type Loose = SelectQueryBuilder<Record<string, Record<string, unknown>>, string, Record<string, unknown>>

/**
 * The inner level: each matching row's group values, bucket and metric value (r.g0…, r.b or
 * r.bv, r.m), for the outer query to aggregate.
 */
function perRowValues(db: Kysely<Database>, dialect: StoreDialect, orgId: string, q: AuditStatsQuery,
  metricValue: RawBuilder<number | null> | undefined, bucketValue: RawBuilder<number | null> | undefined) {
  // On SQLite, when a value comes
  // from a JSON column, the inner query carries LIMIT -1 so the planner does not flatten it
  // back: it runs as a co-routine and each row's JSON path is evaluated once instead of in
  // every aggregate and CASE branch (four or more lookups per row for sum; docs/storage.md).
  // Otherwise both planners flatten it into the plain grouped query; Postgres gets no fence,
  // which would rule out parallel aggregation.
  let inner = whereAudit(dialect, db.selectFrom('audit_events'), orgId, q)
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
  return dialect.name === 'sqlite' && fromJson ? innerSelect.limit(-1) : innerSelect
}

/**
 * WITH g AS (the groups), t AS (the top n values of the dimension, ranked over g)
 * SELECT * FROM g WHERE dimension IN t: the rows are read once (topValues + onlyValues read them twice).
 */
function keepTop(db: Kysely<Database>, grouped: Loose, q: AuditStatsQuery, topIndex: number): Loose {
  const dim = sql.ref(`g${topIndex}`)
  const rank = q.metric.fn === 'avg' ? sql`(sum(s) * 1.0 / sum(n))` : sql`sum(v)`
  return db
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
    .where(sql<SqlBool>`${dim} IN (SELECT d FROM t)`) as unknown as Loose
}

/** Grouped aggregate rows. */
export async function statsRows(db: Kysely<Database>, dialect: StoreDialect, orgId: string, q: AuditStatsQuery): Promise<AuditStatsRow[]> {
  const metricValue = q.metric.fn === 'count' ? undefined : numeric(dialect, q.metric.value)
  const bucketValue = q.bucketBy ? numeric(dialect, q.bucketBy.value) : undefined
  const topIndex = q.top ? q.groupBy.indexOf(q.top.dimension) : -1
  if (q.top && (topIndex < 0 || q.bucketBy)) throw new TypeError('stats top: the dimension must be grouped, and bucketBy uses topValues() + onlyValues')
  if (q.onlyValues?.values.length === 0) return []
  const fenced = perRowValues(db, dialect, orgId, q, metricValue, bucketValue)

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
  let query = (db as unknown as Kysely<Record<string, Record<string, unknown>>>)
    .selectFrom(fenced.as('r') as never)
    .select(selections as never) as unknown as Loose
  // Rows without a bucket value belong to no range.
  if (bucketValue) query = query.where(sql<SqlBool>`r.bv IS NOT NULL`)
  if (groupKeys.length > 0) query = query.groupBy(groupKeys as never)
  if (q.top) query = keepTop(db, query, q, topIndex)
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
}

/** The `n` values of `dimension` with the largest metric, for `top=N:dimension`. */
export async function topValues(db: Kysely<Database>, dialect: StoreDialect, orgId: string, q: AuditStatsQuery, dimension: StatsDimension, n: number): Promise<string[]> {
  const metricValue = q.metric.fn === 'count' ? undefined : numeric(dialect, q.metric.value)
  const qb = whereAudit(dialect, db.selectFrom('audit_events'), orgId, q)
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
}
