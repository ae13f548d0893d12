// The audit filter grammar on the client side. The grammar and its semantics are defined once, in
// src/contract/filter.ts (the server parses every `filter` parameter with it and matches live events
// with it); the CLI reuses it to reject a typo before any request (a usage error, exit 2) and to
// check streamed events, so `audit tail` and `audit query` can never disagree about a filter.

import { parseFilter as parseAuditFilter, type AuditFilterClause } from '../contract/index.js'

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
