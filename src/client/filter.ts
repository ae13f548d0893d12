// The audit filter grammar on the client side. The grammar and its semantics are defined once, in
// src/audit/filter.ts (the server parses every `filter` parameter with it and matches live events
// with it); the CLI reuses it to reject a typo before any request (a usage error, exit 2) and to
// check streamed events, so `audit tail` and `audit query` can never disagree about a filter.

import { FILTER_COLUMNS, type FilterColumn } from '../audit/event.js'
import { matchesFilters, parseFilter as parseAuditFilter } from '../audit/filter.js'
import type { AuditFilterClause } from '../store/index.js'

export { FILTER_COLUMNS, matchesFilters, type FilterColumn }
export type AuditFilter = AuditFilterClause

export class FilterSyntaxError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'FilterSyntaxError'
  }
}

/** Parses `col=a,b`, `col!=a,b` or `col!=`; throws FilterSyntaxError with the server's own wording. */
export function parseFilter(input: string): AuditFilter {
  try {
    return parseAuditFilter(input.trim())
  } catch (error) {
    throw new FilterSyntaxError((error as Error).message)
  }
}
