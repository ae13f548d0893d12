// GET /v1/audit and /v1/workspaces/{id}/audit: validate the querystring, run one keyset page, and
// return a cursor only when the page is full (spec, Audit: pagination).

import type { Store } from '../store/index.js'
import { type AuditFilterClause, type AuditEvent, type AuditOrder, AUDIT_ORDERS, parseFilters, type FilterInput } from '../contract/index.js'
import { decodeCursor, encodeCursor } from './cursor.js'
import { parseIntParam, parseRange, single, validationError } from './params.js'

export const DEFAULT_LIMIT = 100
export const MAX_LIMIT = 10_000

/** Straight from the querystring; everything is validated here. */
export interface AuditQueryInput {
  filter?: FilterInput
  from?: string
  to?: string
  order?: string
  limit?: string | number
  cursor?: string
}

/** Server-side narrowing: `userId` for the `:own` permissions, `workspaceId` for workspace routes. */
export interface AuditScope {
  userId?: string
  workspaceId?: string
}

export interface AuditPage {
  events: AuditEvent[]
  cursor?: string
}

export interface ParsedAuditQuery {
  filters: AuditFilterClause[]
  fromMs?: number
  toMs?: number
  order: AuditOrder
  limit: number
  cursor?: string
}

export function parseAuditQuery(q: AuditQueryInput): ParsedAuditQuery {
  const order = (single('order', q.order) ?? 'desc') as AuditOrder
  if (!AUDIT_ORDERS.includes(order)) throw validationError('order', 'must be asc or desc')
  const limit = parseIntParam('limit', typeof q.limit === 'number' ? q.limit : single('limit', q.limit), DEFAULT_LIMIT, 1, MAX_LIMIT)
  const { fromMs, toMs } = parseRange(single('from', q.from), single('to', q.to))
  const cursor = single('cursor', q.cursor)
  return { filters: parseFilters(q.filter), fromMs, toMs, order, limit, cursor: cursor === '' ? undefined : cursor }
}

/**
 * What a cursor is bound to: the org, the scope and every parameter except limit (a client may
 * change its page size between pages). Filter clauses are sorted so their order does not matter.
 */
export function cursorBinding(orgId: string, p: Omit<ParsedAuditQuery, 'limit' | 'cursor'>, scope: AuditScope): string {
  const filters = p.filters.map((f) => JSON.stringify([f.column, f.op, [...f.values].sort()])).sort()
  return JSON.stringify(['audit.v1', orgId, scope.userId ?? null, scope.workspaceId ?? null, p.order, p.fromMs ?? null, p.toMs ?? null, filters])
}

export async function queryAudit(store: Store, orgId: string, q: AuditQueryInput, scope: AuditScope = {}): Promise<AuditPage> {
  const p = parseAuditQuery(q)
  const binding = cursorBinding(orgId, p, scope)
  const after = p.cursor === undefined ? undefined : await decodeCursor(store, binding, p.cursor)
  const events = await store.audit.page(orgId, {
    filters: p.filters,
    fromMs: p.fromMs,
    toMs: p.toMs,
    order: p.order,
    limit: p.limit,
    after,
    userId: scope.userId,
    workspaceId: scope.workspaceId,
  })
  if (events.length < p.limit) return { events }
  const last = events[events.length - 1]
  return { events, cursor: await encodeCursor(store, binding, { ts: Date.parse(last.timestamp), id: last.id }) }
}
