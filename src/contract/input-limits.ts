// The one check every string that enters corral passes before anything stores it: API bodies,
// query strings, path parameters, multipart fields and agent callback events. What it refuses is
// what one of our databases (or the audit writer) cannot hold, so a request carrying it would
// otherwise be a 500 on one dialect and a silent rewrite on the other:
//   - NUL (U+0000): PostgreSQL text and jsonb refuse it;
//   - a lone UTF-16 surrogate: jsonb refuses its escape, text silently becomes U+FFFD;
//   - nesting deeper than MAX_DEPTH: serializers and jsonb recurse over it.
// Sizes are bounded before this runs (body limits); docs/api.md "Input limits" lists them all.
import { CorralError } from './errors.js'

export const INPUT_LIMITS = {
  /**
   * Objects and arrays nested inside one another (the top-level value is depth 1). Kept well under
   * the audit log's limit for a stored JSON column (MAX_JSON_DEPTH, src/audit/encode.ts: 32), so a
   * body copied into a row's detail a few levels down is still stored, never quarantined.
   */
  maxDepth: 24,
} as const

export interface InputProblem {
  /** Dotted path of the offending value (`detail.items.3`), or the context name for the whole value. */
  field: string
  problem: string
}

const MAX_FIELD_CHARS = 120

/** The first problem in `value` (any JSON-like value), or undefined when it can be stored as-is. */
export function inputProblem(value: unknown, context: string): InputProblem | undefined {
  // Iterative: a value nested thousands deep must not overflow the stack here either.
  const stack: Array<[unknown, string, number]> = [[value, '', 1]]
  while (stack.length > 0) {
    const [v, path, depth] = stack.pop()!
    if (typeof v === 'string') {
      const problem = stringProblem(v)
      if (problem) return { field: fieldName(path, context), problem }
      continue
    }
    if (v === null || typeof v !== 'object') continue
    if (depth > INPUT_LIMITS.maxDepth) return { field: fieldName(path, context), problem: `nests deeper than ${INPUT_LIMITS.maxDepth} levels` }
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], join(path, String(i)), depth + 1])
      continue
    }
    for (const key of Object.keys(v)) {
      const problem = stringProblem(key)
      if (problem) return { field: fieldName(path, context), problem: `has a key that ${problem}` }
      stack.push([(v as Record<string, unknown>)[key], join(path, key), depth + 1])
    }
  }
  return undefined
}

/** What is wrong with one string, or undefined. */
export function stringProblem(s: string): string | undefined {
  if (s.includes('\0')) return 'holds a NUL character (U+0000)'
  if (!(s as unknown as WellFormedString).isWellFormed()) return 'holds a lone UTF-16 surrogate (not valid Unicode)'
  return undefined
}

/** Throws the 400 validation_error envelope (details.fields) when `value` holds a problem. */
export function assertCleanInput(value: unknown, context: string): void {
  const found = inputProblem(value, context)
  if (found) throw invalidInput(found)
}

export function invalidInput(found: InputProblem): CorralError {
  return new CorralError('validation_error', `invalid input: ${found.field} ${found.problem}`, 400, { fields: { [found.field]: found.problem } })
}

// ES2024 (Node >= 20); our tsconfig's lib predates it.
interface WellFormedString {
  isWellFormed(): boolean
}

const join = (path: string, key: string) => (path ? `${path}.${key}` : key)

function fieldName(path: string, context: string): string {
  const name = path || context
  return name.length > MAX_FIELD_CHARS ? `${name.slice(0, MAX_FIELD_CHARS)}…` : name
}
