// The audit explorer's query as data: filters in the API's grammar (`col=v1,v2`, `col!=v`), the
// time range, order and page size; read from and written to the hash route so a query can be
// bookmarked. Also the exports: every page of the current query as NDJSON or CSV.
import type { Api, Query } from './api.js'
import { FILTER_COLUMNS as API_FILTER_COLUMNS, type FilterColumn } from '../contract/audit-vocabulary.js'
import { saveBlob } from './save-file.js'
import type { AuditEvent, AuditOrder } from './wire.js'

/** The API's filterable columns (spec "GET /v1/audit"; `counter` is virtual), the two most asked for first. */
export const FILTER_COLUMNS: readonly FilterColumn[] = ['event_type', 'decision', ...API_FILTER_COLUMNS.filter((c) => c !== 'event_type' && c !== 'decision')]

/** Every column of an audit row (the column picker's choices), in the spec's order. */
export const ALL_COLUMNS = [
  'timestamp', 'event_type', 'category', 'actor', 'user_id', 'workspace_id', 'task_id', 'agent_role', 'agent_provider', 'destination',
  'method', 'path', 'decision', 'reason', 'latency_ms', 'transforms_applied', 'validations_applied', 'policy_type', 'phase',
  'capability_name', 'detail', 'debits', 'budget_state', 'floored', 'transforms_failed', 'auth_used', 'auth_failures', 'id', 'org_id',
] as const

export const DEFAULT_COLUMNS = ['timestamp', 'event_type', 'workspace_id', 'decision', 'reason', 'method', 'destination', 'path', 'capability_name', 'debits']

export interface AuditQueryState {
  filters: string[]
  from: string
  to: string
  order: AuditOrder
  limit: number
}

export function queryFromParams(params: URLSearchParams): AuditQueryState {
  const order = params.get('order') === 'asc' ? 'asc' : 'desc'
  const limit = Number(params.get('limit') ?? 100)
  return {
    filters: params.getAll('filter').filter(Boolean),
    from: params.get('from') ?? '',
    to: params.get('to') ?? '',
    order,
    limit: Number.isInteger(limit) && limit > 0 && limit <= 10_000 ? limit : 100,
  }
}

export function paramsOf(q: AuditQueryState): URLSearchParams {
  const p = new URLSearchParams()
  for (const f of q.filters) p.append('filter', f)
  if (q.from) p.set('from', q.from)
  if (q.to) p.set('to', q.to)
  if (q.order !== 'desc') p.set('order', q.order)
  if (q.limit !== 100) p.set('limit', String(q.limit))
  return p
}

export function apiQuery(q: AuditQueryState, cursor?: string): Query {
  return { filter: q.filters, from: toIso(q.from), to: toIso(q.to), order: q.order, limit: q.limit, cursor }
}

/** A datetime-local value (local time) as RFC 3339; anything else as typed. */
export function toIso(value: string): string | undefined {
  if (!value) return undefined
  const d = new Date(value)
  return /^\d{4}-\d\d-\d\dT\d\d:\d\d/.test(value) && !Number.isNaN(d.getTime()) ? d.toISOString() : value
}

/** Splits `col!=a,b` into its parts (for the filter editor). */
export function splitFilter(f: string): { column: string; op: '=' | '!='; value: string } {
  const m = /^([a-z_]+)(!=|=)(.*)$/.exec(f)
  return m ? { column: m[1]!, op: m[2] as '=' | '!=', value: m[3]! } : { column: 'event_type', op: '=', value: f }
}

export function cell(e: AuditEvent, column: string): string {
  const v = (e as unknown as Record<string, unknown>)[column]
  if (v === undefined || v === null) return ''
  return typeof v === 'object' ? JSON.stringify(v) : String(v)
}

const MAX_EXPORT_PAGES = 20

/** Every event of the query (at most 20 pages of `limit`), following the cursor. */
export async function exportEvents(api: Api, q: AuditQueryState): Promise<{ events: AuditEvent[]; truncated: boolean }> {
  const events: AuditEvent[] = []
  let cursor: string | undefined
  for (let i = 0; i < MAX_EXPORT_PAGES; i++) {
    const page = await api.get<{ events: AuditEvent[]; cursor?: string }>('/audit', apiQuery({ ...q, limit: 10_000 }, cursor))
    events.push(...page.events)
    cursor = page.cursor
    if (!cursor) return { events, truncated: false }
  }
  return { events, truncated: true }
}

export function toNdjson(events: readonly AuditEvent[]): string {
  return events.map((e) => JSON.stringify(e)).join('\n') + (events.length ? '\n' : '')
}

/** RFC 4180 CSV of the chosen columns; objects as JSON in their cell. */
export function toCsv(events: readonly AuditEvent[], columns: readonly string[]): string {
  const quote = (s: string) => (/[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s)
  return [columns.join(','), ...events.map((e) => columns.map((c) => quote(cell(e, c))).join(','))].join('\r\n') + '\r\n'
}

/** Offers `text` as a file download (an object URL on a temporary link; nothing leaves the browser). */
export function download(name: string, type: string, text: string): void {
  saveBlob(name, new Blob([text], { type }))
}
