// Validation of the scalar query parameters shared by audit queries and stats.
import { CorralError } from '../contract/index.js'

const DATE_TIME = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/

export function validationError(field: string, message: string): CorralError {
  return new CorralError('validation_error', `${field}: ${message}`, 400, { fields: { [field]: message } })
}

/** An RFC 3339 date-time as epoch milliseconds. */
export function parseDateTime(field: string, value: unknown): number | undefined {
  if (value === undefined || value === '') return undefined
  if (typeof value !== 'string' || !DATE_TIME.test(value)) throw validationError(field, 'must be an RFC 3339 date-time, e.g. 2026-01-31T12:00:00Z')
  const ms = Date.parse(value.replace(' ', 'T'))
  if (Number.isNaN(ms)) throw validationError(field, 'is not a valid date-time')
  return ms
}

/** from/to as an inclusive-exclusive range [from, to). */
export function parseRange(from: unknown, to: unknown): { fromMs?: number; toMs?: number } {
  const fromMs = parseDateTime('from', from)
  const toMs = parseDateTime('to', to)
  if (fromMs !== undefined && toMs !== undefined && fromMs > toMs) throw validationError('to', 'must not be before from')
  return { fromMs, toMs }
}

export function parseIntParam(field: string, value: unknown, dflt: number, min: number, max: number): number {
  if (value === undefined || value === '') return dflt
  const n = typeof value === 'number' ? value : typeof value === 'string' && /^\d{1,9}$/.test(value) ? Number(value) : NaN
  if (!Number.isInteger(n) || n < min || n > max) throw validationError(field, `must be an integer from ${min} to ${max}`)
  return n
}

/** A querystring value that must occur at most once. */
export function single(field: string, value: unknown): string | undefined {
  if (value === undefined) return undefined
  if (Array.isArray(value)) {
    if (value.length > 1) throw validationError(field, 'may be given only once')
    return single(field, value[0])
  }
  if (typeof value !== 'string') throw validationError(field, 'must be a string')
  return value
}
