// Time bounds for audit queries: RFC 3339 timestamps pass through (normalised to UTC), and relative
// spans such as `15m`, `2h`, `7d` mean "that long before now", the way people ask for recent events.

const UNITS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 }

/** An RFC 3339 date-time with an explicit offset (a bare date is accepted as UTC midnight). */
const RFC3339 = /^\d{4}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:[Zz]|[+-]\d{2}:\d{2}))?$/

export function resolveTime(input: string, now: Date = new Date()): string {
  const value = input.trim()
  if (value === 'now') return now.toISOString()
  const relative = /^(\d+)([smhdw])$/.exec(value)
  if (relative) return new Date(now.getTime() - Number(relative[1]) * UNITS[relative[2]]).toISOString()
  if (RFC3339.test(value)) {
    const at = Date.parse(value.length === 10 ? `${value}T00:00:00Z` : value)
    if (!Number.isNaN(at)) return new Date(at).toISOString()
  }
  throw new RangeError(`invalid time "${input}": expected RFC 3339 (2026-01-31T12:00:00Z) or a relative span like 15m, 2h, 7d`)
}
