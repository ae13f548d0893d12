// The `filter` grammar shared by audit queries, stats and the live stream (spec, GET /v1/audit):
//   col=a,b   exact match on any listed value
//   col!=a,b  the column is none of the listed values (rows without the column match too)
//   col!=     the column is populated
// Repeated filters are ANDed. `counter` is virtual: the event's debits or budget_state has that key.

import { FILTER_COLUMNS, type AuditEvent, type FilterColumn } from './audit-vocabulary.js'
import { CorralError } from './errors.js'

/** One parsed `filter` clause; the store turns it into SQL, the live bus matches it in memory. */
export interface AuditFilterClause {
  column: FilterColumn
  op: 'in' | 'not_in' | 'populated'
  values: string[]
}

export const MAX_FILTERS = 50
export const MAX_FILTER_VALUES = 500
export const MAX_FILTER_VALUE_LENGTH = 1000

export type FilterInput = string | readonly string[] | undefined

export function parseFilters(input: FilterInput): AuditFilterClause[] {
  const list = input === undefined ? [] : typeof input === 'string' ? [input] : [...input]
  if (list.length > MAX_FILTERS) throw invalidFilter(`at most ${MAX_FILTERS} filters are allowed`)
  return list.map(parseFilter)
}

export function parseFilter(raw: string): AuditFilterClause {
  if (typeof raw !== 'string') throw invalidFilter('filter must be a string of the form col=a,b, col!=a,b or col!=')
  const eq = raw.indexOf('=')
  if (eq <= 0) throw invalidFilter(`filter "${clip(raw)}" must have the form col=a,b, col!=a,b or col!=`)
  const negated = raw[eq - 1] === '!'
  const column = raw.slice(0, negated ? eq - 1 : eq)
  if (!(FILTER_COLUMNS as readonly string[]).includes(column)) {
    throw invalidFilter(`unknown filter column "${clip(column)}"; filterable columns: ${FILTER_COLUMNS.join(', ')}`)
  }
  const rest = raw.slice(eq + 1)
  if (rest === '') {
    if (negated) return { column: column as FilterColumn, op: 'populated', values: [] }
    throw invalidFilter(`filter "${clip(raw)}" needs at least one value (use ${column}!= to match populated values)`)
  }
  const values = rest.split(',')
  if (values.some((v) => v === '')) throw invalidFilter(`filter "${clip(raw)}" has an empty value in its list`)
  if (values.length > MAX_FILTER_VALUES) throw invalidFilter(`a filter may list at most ${MAX_FILTER_VALUES} values`)
  if (values.some((v) => v.length > MAX_FILTER_VALUE_LENGTH)) throw invalidFilter(`filter values are at most ${MAX_FILTER_VALUE_LENGTH} characters`)
  return { column: column as FilterColumn, op: negated ? 'not_in' : 'in', values: [...new Set(values)] }
}

/** The same semantics as the SQL the store runs, for events that arrive on the live bus. */
export function matchesFilters(e: AuditEvent, clauses: readonly AuditFilterClause[]): boolean {
  return clauses.every((c) => matchesClause(e, c))
}

function matchesClause(e: AuditEvent, c: AuditFilterClause): boolean {
  if (c.column === 'counter') {
    const keys = new Set([...Object.keys(e.debits ?? {}), ...Object.keys(e.budget_state ?? {})])
    if (c.op === 'populated') return keys.size > 0
    const any = c.values.some((v) => keys.has(v))
    return c.op === 'in' ? any : !any
  }
  const value = e[c.column]
  const present = value !== undefined && value !== null && value !== ''
  if (c.op === 'populated') return present
  if (c.op === 'in') return value !== undefined && value !== null && c.values.includes(String(value))
  return value === undefined || value === null || !c.values.includes(String(value))
}

function invalidFilter(message: string): CorralError {
  return new CorralError('invalid_query', message, 400, { fields: { filter: message } })
}

function clip(s: string): string {
  return s.length > 80 ? `${s.slice(0, 77)}...` : s
}
