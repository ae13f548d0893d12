// GET /v1/audit/stats and the workspace variant: parse the stats grammar (docs/audit.md), run the
// grouped aggregate in the store, and shape the spec's buckets ({group, bucket?, value}).
//
//   group_by    comma-separated dimensions from STATS_DIMENSIONS (at most 5)
//   time_bucket auto | 5m | 15m | 1h | 6h | 1d  (bucket = ISO start of the bucket)
//   bucket_by   <numeric path>:b1,b2,…        (bucket = "[-inf,b1)", "[b1,b2)", …, "[bn,+inf)")
//   metric      count | sum:<numeric path> | avg:<numeric path>
//   top         N:<dimension>                  (only the N largest values of that dimension)
//   numeric path: latency_ms | transforms_applied | validations_applied
//                 | debits.<key> | budget_state.<key>[.<key>…] | detail.<key>[.<key>…]

import { CorralError, parseFilters, type FilterInput, type TimeBucket } from '../contract/index.js'
import type { AuditStatsQuery, NumericPath, StatsDimension, Store } from '../store/index.js'
import { parseRange, single } from './params.js'
import type { AuditScope } from './query.js'

export const STATS_DIMENSIONS = [
  'event_type', 'category', 'actor', 'user_id', 'workspace_id', 'task_id', 'agent_role', 'agent_provider', 'destination',
  'method', 'path', 'decision', 'reason', 'policy_type', 'phase', 'capability_name',
] as const satisfies readonly StatsDimension[]

/** Each fixed bucket's width (ms): every name of the contract's TIME_BUCKETS but `auto`, no other. */
export const TIME_BUCKETS = { '5m': 300_000, '15m': 900_000, '1h': 3_600_000, '6h': 21_600_000, '1d': 86_400_000 } as const satisfies Record<Exclude<TimeBucket, 'auto'>, number>
export type { TimeBucket }

const INT_PATHS = ['latency_ms', 'transforms_applied', 'validations_applied'] as const
const JSON_PATH_ROOTS = ['debits', 'budget_state', 'detail'] as const
const KEY = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/
const MAX_GROUP_BY = 5
const MAX_BOUNDS = 50
export const MAX_TOP = 1000
export const MAX_STATS_ROWS = 10_000

export interface AuditStatsInput {
  group_by?: string
  time_bucket?: string
  bucket_by?: string
  metric?: string
  top?: string
  filter?: FilterInput
  from?: string
  to?: string
}

export interface StatsBucket {
  group: Record<string, string>
  bucket?: string
  value: number
}

function invalidQuery(param: string, message: string): CorralError {
  return new CorralError('invalid_query', `${param}: ${message}`, 400, { fields: { [param]: message } })
}

function parseDimension(param: string, d: string): StatsDimension {
  if (!(STATS_DIMENSIONS as readonly string[]).includes(d)) {
    throw invalidQuery(param, `unknown dimension "${d.slice(0, 64)}"; dimensions: ${STATS_DIMENSIONS.join(', ')}`)
  }
  return d as StatsDimension
}

export function parseNumericPath(param: string, raw: string): NumericPath {
  if ((INT_PATHS as readonly string[]).includes(raw)) return { column: raw as (typeof INT_PATHS)[number] }
  const [root, ...keys] = raw.split('.')
  if ((JSON_PATH_ROOTS as readonly string[]).includes(root) && keys.length >= 1 && keys.length <= 4 && keys.every((k) => KEY.test(k))) {
    if (root === 'debits' && keys.length !== 1) throw invalidQuery(param, 'debits paths have one key: debits.<counter>')
    return { column: root as (typeof JSON_PATH_ROOTS)[number], path: keys }
  }
  throw invalidQuery(
    param,
    `"${raw.slice(0, 64)}" is not a numeric path; use ${INT_PATHS.join(', ')}, debits.<counter>, budget_state.<key>[.<key>] or detail.<key>[.<key>]`,
  )
}

export interface ParsedStats {
  query: Omit<AuditStatsQuery, 'userId' | 'workspaceId' | 'timeBucketMs'>
  timeBucket?: TimeBucket
  top?: { n: number; dimension: StatsDimension }
}

export function parseStatsQuery(q: AuditStatsInput): ParsedStats {
  const groupByRaw = single('group_by', q.group_by)
  const groupBy: StatsDimension[] = []
  if (groupByRaw) {
    for (const d of groupByRaw.split(',')) {
      const dim = parseDimension('group_by', d.trim())
      if (groupBy.includes(dim)) throw invalidQuery('group_by', `dimension "${dim}" is listed twice`)
      groupBy.push(dim)
    }
    if (groupBy.length > MAX_GROUP_BY) throw invalidQuery('group_by', `at most ${MAX_GROUP_BY} dimensions`)
  }

  const metricRaw = single('metric', q.metric) || 'count'
  let metric: AuditStatsQuery['metric']
  if (metricRaw === 'count') metric = { fn: 'count' }
  else {
    const m = /^(sum|avg):(.+)$/.exec(metricRaw)
    if (!m) throw invalidQuery('metric', 'must be count, sum:<numeric path> or avg:<numeric path>')
    metric = { fn: m[1] as 'sum' | 'avg', value: parseNumericPath('metric', m[2]) }
  }

  const tb = single('time_bucket', q.time_bucket)
  let timeBucket: TimeBucket | undefined
  if (tb) {
    if (tb !== 'auto' && !(tb in TIME_BUCKETS)) throw invalidQuery('time_bucket', `must be one of auto, ${Object.keys(TIME_BUCKETS).join(', ')}`)
    timeBucket = tb as TimeBucket
  }

  const bb = single('bucket_by', q.bucket_by)
  let bucketBy: AuditStatsQuery['bucketBy']
  if (bb) {
    if (timeBucket) throw invalidQuery('bucket_by', 'cannot be combined with time_bucket (a bucket is either a time or a range)')
    const colon = bb.lastIndexOf(':')
    if (colon <= 0) throw invalidQuery('bucket_by', 'must have the form <numeric path>:b1,b2,…')
    const value = parseNumericPath('bucket_by', bb.slice(0, colon))
    const parts = bb.slice(colon + 1).split(',')
    const bounds = parts.map(Number)
    if (parts.some((p) => p.trim() === '') || bounds.some((b) => !Number.isFinite(b))) throw invalidQuery('bucket_by', 'bounds must be numbers')
    if (bounds.length > MAX_BOUNDS) throw invalidQuery('bucket_by', `at most ${MAX_BOUNDS} bounds`)
    if (bounds.some((b, i) => i > 0 && b <= bounds[i - 1])) throw invalidQuery('bucket_by', 'bounds must be strictly increasing')
    bucketBy = { value, bounds }
  }

  const topRaw = single('top', q.top)
  let top: ParsedStats['top']
  if (topRaw) {
    const m = /^(\d{1,4}):(.+)$/.exec(topRaw)
    if (!m) throw invalidQuery('top', 'must have the form N:<dimension>')
    const n = Number(m[1])
    if (n < 1 || n > MAX_TOP) throw invalidQuery('top', `N must be from 1 to ${MAX_TOP}`)
    const dimension = parseDimension('top', m[2])
    // The ranked dimension is always part of the result's groups.
    if (!groupBy.includes(dimension)) {
      if (groupBy.length >= MAX_GROUP_BY) throw invalidQuery('group_by', `at most ${MAX_GROUP_BY} dimensions (top adds its dimension)`)
      groupBy.push(dimension)
    }
    top = { n, dimension }
  }

  const { fromMs, toMs } = parseRange(single('from', q.from), single('to', q.to))
  return {
    query: { filters: parseFilters(q.filter), fromMs, toMs, groupBy, bucketBy, metric, maxRows: MAX_STATS_ROWS },
    timeBucket,
    top,
  }
}

/** `auto`: the smallest bucket that keeps the series at a readable length for the span. */
export function autoBucketMs(spanMs: number): number {
  const h = 3_600_000
  if (spanMs <= 6 * h) return TIME_BUCKETS['5m']
  if (spanMs <= 24 * h) return TIME_BUCKETS['15m']
  if (spanMs <= 7 * 24 * h) return TIME_BUCKETS['1h']
  if (spanMs <= 30 * 24 * h) return TIME_BUCKETS['6h']
  return TIME_BUCKETS['1d']
}

export function rangeLabel(bounds: readonly number[], index: number): string {
  const lo = index === 0 ? '-inf' : String(bounds[index - 1])
  const hi = index === bounds.length ? '+inf' : String(bounds[index])
  return `[${lo},${hi})`
}

export async function auditStats(store: Store, orgId: string, q: AuditStatsInput, scope: AuditScope = {}): Promise<{ buckets: StatsBucket[] }> {
  const p = parseStatsQuery(q)
  const query: AuditStatsQuery = { ...p.query, userId: scope.userId, workspaceId: scope.workspaceId }
  if (p.timeBucket === 'auto') {
    const end = query.toMs ?? Date.now()
    const start = query.fromMs ?? (await store.audit.minTs(orgId, query)) ?? end
    query.timeBucketMs = autoBucketMs(Math.max(0, end - start))
  } else if (p.timeBucket) query.timeBucketMs = TIME_BUCKETS[p.timeBucket]
  if (p.top && query.bucketBy) {
    // Rows without a bucket value still count towards the ranking: rank first, then group.
    query.onlyValues = { dimension: p.top.dimension, values: await store.audit.topValues(orgId, query, p.top.dimension, p.top.n) }
  } else if (p.top) query.top = p.top
  const rows = await store.audit.stats(orgId, query)
  return {
    buckets: rows.map((r) => {
      const group: Record<string, string> = {}
      query.groupBy.forEach((d, i) => (group[d] = r.group[i]))
      if (r.bucket === undefined) return { group, value: r.value }
      const bucket = query.timeBucketMs !== undefined ? new Date(r.bucket).toISOString() : rangeLabel(query.bucketBy!.bounds, r.bucket)
      return { group, bucket, value: r.value }
    }),
  }
}
