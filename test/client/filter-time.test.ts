import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { FilterSyntaxError, parseFilter, resolveTime } from '../../src/client/index.js'
import { FILTER_COLUMNS, matchesFilters, type AuditEvent } from '../../src/contract/index.js'

const base: AuditEvent = { id: 'x', org_id: 'o', user_id: 'system', timestamp: '2026-01-01T00:00:00Z', event_type: 'policy_decision', category: 'audit', actor: 'policy-engine' }

describe(parseFilter.name, () => {
  it('parses the three forms of the grammar', () => {
    expect(parseFilter('decision=deny')).toMatchObject({ column: 'decision', op: 'in', values: ['deny'] })
    expect(parseFilter('event_type!=a,b')).toMatchObject({ column: 'event_type', op: 'not_in', values: ['a', 'b'] })
    expect(parseFilter('workspace_id!=')).toMatchObject({ column: 'workspace_id', op: 'populated' })
  })

  it('rejects unknown columns, a missing operator, empty lists and empty list items', () => {
    expect(() => parseFilter('user_id=x')).toThrow(FilterSyntaxError)
    expect(() => parseFilter('user_id=x')).toThrow(/unknown filter column "user_id"/)
    expect(() => parseFilter('decision')).toThrow(/must have the form col=a,b/)
    expect(() => parseFilter('decision=')).toThrow(/needs at least one value/)
    expect(() => parseFilter('decision=a,,b')).toThrow(/empty value/)
  })

  it('accepts every filterable column', () => {
    for (const column of FILTER_COLUMNS) expect(parseFilter(`${column}=v`).column).toBe(column)
  })
})

describe(matchesFilters.name, () => {
  const deny = { ...base, decision: 'deny' as const, reason: 'no_match' as const, destination: 'api.example.com' }
  const allow = { ...base, decision: 'allow' as const, debits: { tokens: 10 }, budget_state: { requests: { used: 1 } } }
  const lifecycle = { ...base, event_type: 'workspace_created' as const, category: 'activity' as const, workspace_id: 'ws_1' }

  it('applies IN, NOT IN and populated, ANDed across filters', () => {
    const f = (...s: string[]) => s.map(parseFilter)
    expect(matchesFilters(deny, f('decision=deny'))).toBe(true)
    expect(matchesFilters(allow, f('decision=deny'))).toBe(false)
    expect(matchesFilters(allow, f('decision!=deny'))).toBe(true)
    expect(matchesFilters(deny, f('decision=deny', 'destination=other.example.com'))).toBe(false)
    expect(matchesFilters(lifecycle, f('workspace_id!='))).toBe(true)
    expect(matchesFilters(deny, f('workspace_id!='))).toBe(false)
    // An event without the column is "none of the listed values" (the server's semantics, docs/audit.md).
    expect(matchesFilters(lifecycle, f('decision!=deny'))).toBe(true)
    expect(matchesFilters(lifecycle, f('decision=deny'))).toBe(false)
  })

  it('matches the virtual counter column on debits or budget_state keys', () => {
    const f = (s: string) => [parseFilter(s)]
    expect(matchesFilters(allow, f('counter=tokens'))).toBe(true)
    expect(matchesFilters(allow, f('counter=requests'))).toBe(true)
    expect(matchesFilters(allow, f('counter=bytes'))).toBe(false)
    expect(matchesFilters(deny, f('counter!='))).toBe(false)
  })

  it('never lets an event match both col=v and col!=v', () => {
    fc.assert(
      fc.property(fc.constantFrom('allow', 'deny', undefined), fc.constantFrom('allow', 'deny'), (decision, v) => {
        const e = { ...base, ...(decision ? { decision } : {}) } as AuditEvent
        return !(matchesFilters(e, [parseFilter(`decision=${v}`)]) && matchesFilters(e, [parseFilter(`decision!=${v}`)]))
      }),
    )
  })
})

describe(resolveTime.name, () => {
  const now = new Date('2026-03-01T12:00:00.000Z')

  it('reads relative spans as time before now', () => {
    expect(resolveTime('15m', now)).toBe('2026-03-01T11:45:00.000Z')
    expect(resolveTime('2h', now)).toBe('2026-03-01T10:00:00.000Z')
    expect(resolveTime('7d', now)).toBe('2026-02-22T12:00:00.000Z')
    expect(resolveTime('now', now)).toBe(now.toISOString())
  })

  it('normalises RFC 3339 to UTC and accepts a bare date as UTC midnight', () => {
    expect(resolveTime('2026-01-31T12:00:00+02:00', now)).toBe('2026-01-31T10:00:00.000Z')
    expect(resolveTime('2026-01-31', now)).toBe('2026-01-31T00:00:00.000Z')
  })

  it('rejects anything else, including a local time without an offset', () => {
    for (const bad of ['yesterday', '15x', '2026-01-31T12:00:00', '-5m', '']) expect(() => resolveTime(bad, now)).toThrow(/invalid time/)
  })
})
