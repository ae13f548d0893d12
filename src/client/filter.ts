// The audit filter grammar (control-plane.md, GET /v1/audit): `col=a,b` (IN), `col!=a,b` (NOT IN),
// `col!=` (populated). The CLI validates filters before sending them (a typo is a usage error, not
// a round trip) and `audit tail` applies the same grammar to live events, since the activity stream
// takes no filter parameters.

import type { AuditEvent } from '../audit/event.js'

/** The fifteen filterable columns; `counter` is virtual (a key of `debits` or `budget_state`). */
export const FILTER_COLUMNS = [
  'workspace_id', 'task_id', 'decision', 'destination', 'capability_name', 'event_type', 'category',
  'agent_role', 'agent_provider', 'method', 'path', 'actor', 'counter', 'phase', 'policy_type',
] as const
export type FilterColumn = (typeof FILTER_COLUMNS)[number]

export type AuditFilter =
  | { readonly column: FilterColumn; readonly op: 'in' | 'not_in'; readonly values: readonly string[] }
  | { readonly column: FilterColumn; readonly op: 'populated' }

export class FilterSyntaxError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'FilterSyntaxError'
  }
}

export function parseFilter(input: string): AuditFilter {
  const match = /^([a-z_]+)(!=|=)(.*)$/s.exec(input.trim())
  if (!match) throw new FilterSyntaxError(`invalid filter "${input}": expected col=a,b or col!=a,b or col!=`)
  const [, column, operator, rest] = match
  if (!(FILTER_COLUMNS as readonly string[]).includes(column)) {
    throw new FilterSyntaxError(`unknown filter column "${column}" (filterable: ${FILTER_COLUMNS.join(', ')})`)
  }
  const values = rest === '' ? [] : rest.split(',')
  if (values.some((v) => v === '')) throw new FilterSyntaxError(`invalid filter "${input}": empty value in list`)
  if (operator === '!=' && values.length === 0) return { column: column as FilterColumn, op: 'populated' }
  if (values.length === 0) throw new FilterSyntaxError(`invalid filter "${input}": "=" needs at least one value`)
  return { column: column as FilterColumn, op: operator === '=' ? 'in' : 'not_in', values }
}

/** Values of a column on one event; `counter` yields every counter key the event touches. */
function columnValues(event: AuditEvent, column: FilterColumn): string[] {
  if (column === 'counter') {
    return [...new Set([...Object.keys(event.debits ?? {}), ...Object.keys(event.budget_state ?? {})])]
  }
  const value = event[column]
  return value === undefined || value === null || value === '' ? [] : [String(value)]
}

/**
 * True when the event satisfies every filter (filters are ANDed). Unpopulated columns follow SQL
 * semantics, like the server: they match neither `col=…` nor `col!=…`, only the absence of a filter.
 */
export function matchesFilters(event: AuditEvent, filters: readonly AuditFilter[]): boolean {
  return filters.every((filter) => {
    const values = columnValues(event, filter.column)
    if (filter.op === 'populated') return values.length > 0
    if (values.length === 0) return false
    if (filter.op === 'in') return values.some((v) => filter.values.includes(v))
    return values.every((v) => !filter.values.includes(v))
  })
}
