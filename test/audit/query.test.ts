import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { queryAudit, stamp } from '../../src/audit/index.js'
import { FILTER_COLUMNS, matchesFilters, parseFilters, type AuditEvent, type NewAuditEvent, CorralError } from '../../src/contract/index.js'
import type { Store } from '../../src/store/index.js'
import { testDialects } from '../helpers/dialects.js'
import { decision, mutation, orgId } from './fixtures.js'

const BASE = Date.parse('2026-03-01T00:00:00.000Z')

/** A varied data set: every filterable column takes several values and is sometimes absent. */
function dataset(org: string): AuditEvent[] {
  const out: AuditEvent[] = []
  for (let i = 0; i < 240; i++) {
    // Several events share a timestamp so the id tiebreak matters.
    const timestamp = new Date(BASE + Math.floor(i / 3) * 60_000).toISOString()
    let e: NewAuditEvent
    if (i % 4 === 0) {
      e = mutation(org, { user_id: i % 8 === 0 ? 'system' : 'usr_2', workspace_id: i % 8 === 0 ? undefined : 'ws_2' })
    } else {
      e = decision(org, {
        user_id: ['usr_1', 'usr_2', 'system'][(i >> 1) % 3],
        workspace_id: ['ws_1', 'ws_2', 'ws_3'][i % 3],
        task_id: i % 5 === 0 ? undefined : `task_${i % 7}`,
        decision: i % 6 === 1 ? 'deny' : 'allow',
        reason: i % 6 === 1 ? 'no_match' : undefined,
        destination: ['api.a.com', 'api.b.com'][i % 2],
        capability_name: i % 6 === 1 ? undefined : ['chat', 'embed', 'search'][i % 3],
        agent_role: i % 9 === 0 ? '' : ['coder', 'writer'][i % 2],
        agent_provider: ['anthropic', 'openai'][i % 2],
        method: ['GET', 'POST'][i % 2],
        path: ['/v1/a', '/v1/b', '/v1/c'][i % 3],
        phase: i % 6 === 1 ? 'request_headers' : 'response_body',
        policy_type: i % 10 === 0 ? 'dns' : 'http',
        debits: i % 6 === 1 ? undefined : i % 2 ? { tokens: i } : { requests: 1 },
        budget_state: i % 6 === 1 ? undefined : i % 3 ? { tokens: { used: i } } : {},
        latency_ms: i,
        event_type: 'policy_decision',
      })
    }
    if (i % 11 === 0) e = { ...e, category: 'activity', actor: 'agent', event_type: 'tool_call' }
    out.push(stamp({ ...e, timestamp }))
  }
  return out
}

const byKeyAsc = (a: AuditEvent, b: AuditEvent) =>
  a.timestamp < b.timestamp ? -1 : a.timestamp > b.timestamp ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0

async function expectCode(p: Promise<unknown>, code: string) {
  const err = await p.then(() => undefined, (e: unknown) => e)
  expect(err).toBeInstanceOf(CorralError)
  expect((err as CorralError).code).toBe(code)
  expect((err as CorralError).status).toBe(400)
}

for (const d of testDialects()) {
  describe(`audit query [${d.name}]`, () => {
    let store: Store
    const org = orgId()
    const otherOrg = orgId()
    let all: AuditEvent[]

    beforeAll(async () => {
      store = await d.open()
      all = dataset(org)
      await store.audit.insertBatch(all)
      await store.audit.insertBatch(dataset(otherOrg))
      all.sort(byKeyAsc)
    })
    afterAll(async () => {
      await store.close()
    })

    const ids = (events: AuditEvent[]) => events.map((e) => e.id)

    it('defaults: newest first on (timestamp, id), limit 100, cursor when full', async () => {
      const page = await queryAudit(store, org, {})
      expect(page.events).toHaveLength(100)
      expect(ids(page.events)).toEqual(ids([...all].reverse().slice(0, 100)))
      expect(page.cursor).toEqual(expect.any(String))
      expect(page.events[0]).toEqual(all[all.length - 1])
    })

    it('order=asc and no cursor on a short last page', async () => {
      const page = await queryAudit(store, org, { order: 'asc', limit: '1000' })
      expect(ids(page.events)).toEqual(ids(all))
      expect(page.cursor).toBeUndefined()
    })

    it('pages through the whole result with cursors, in both orders, with no gaps or duplicates', async () => {
      for (const order of ['asc', 'desc'] as const) {
        for (const limit of [1, 7, 60, 240]) {
          const seen: string[] = []
          let cursor: string | undefined
          let pages = 0
          do {
            const page = await queryAudit(store, org, { order, limit, cursor, filter: 'category=audit,activity' })
            seen.push(...ids(page.events))
            cursor = page.cursor
            pages++
          } while (cursor && pages < 300)
          const expected = order === 'asc' ? ids(all) : ids([...all].reverse())
          expect(seen).toEqual(expected)
        }
      }
    })

    it('a cursor may be reused with a different page size', async () => {
      const first = await queryAudit(store, org, { limit: 10 })
      const next = await queryAudit(store, org, { limit: 5, cursor: first.cursor })
      expect(ids(next.events)).toEqual(ids([...all].reverse().slice(10, 15)))
    })

    it('every filter form on every filterable column matches the reference semantics', async () => {
      for (const column of FILTER_COLUMNS) {
        const values =
          column === 'counter'
            ? ['tokens', 'requests']
            : [...new Set(all.map((e) => e[column as keyof AuditEvent]).filter((v) => v !== undefined && v !== ''))].map(String)
        expect(values.length, column).toBeGreaterThan(0)
        const forms = [`${column}=${values[0]}`, `${column}=${values.slice(0, 2).join(',')}`, `${column}!=${values[0]}`, `${column}!=`]
        for (const f of forms) {
          const expected = all.filter((e) => matchesFilters(e, parseFilters(f)))
          const page = await queryAudit(store, org, { filter: f, order: 'asc', limit: 10_000 })
          expect(ids(page.events), f).toEqual(ids(expected))
        }
      }
    })

    it('spot checks of the semantics: not-in keeps absent values, populated skips empty ones, counter looks in both objects', async () => {
      const notDeny = await queryAudit(store, org, { filter: 'decision!=deny', limit: 10_000 })
      expect(notDeny.events.some((e) => e.decision === undefined)).toBe(true)
      expect(notDeny.events.some((e) => e.decision === 'deny')).toBe(false)
      const roles = await queryAudit(store, org, { filter: 'agent_role!=', limit: 10_000 })
      expect(roles.events.every((e) => e.agent_role === 'coder' || e.agent_role === 'writer')).toBe(true)
      const tokens = await queryAudit(store, org, { filter: 'counter=tokens', limit: 10_000 })
      expect(tokens.events.every((e) => 'tokens' in (e.debits ?? {}) || 'tokens' in (e.budget_state ?? {}))).toBe(true)
      expect(tokens.events.some((e) => !('tokens' in (e.debits ?? {})))).toBe(true) // matched through budget_state only
    })

    it('repeated filters are ANDed', async () => {
      const page = await queryAudit(store, org, { filter: ['decision=allow', 'workspace_id=ws_1', 'method!=GET'], limit: 10_000 })
      const expected = all.filter((e) => e.decision === 'allow' && e.workspace_id === 'ws_1' && e.method !== 'GET')
      expect(new Set(ids(page.events))).toEqual(new Set(ids(expected)))
      expect(expected.length).toBeGreaterThan(0)
    })

    it('from is inclusive and to exclusive', async () => {
      const from = new Date(BASE + 10 * 60_000).toISOString()
      const to = new Date(BASE + 20 * 60_000).toISOString()
      const page = await queryAudit(store, org, { from, to, order: 'asc', limit: 10_000 })
      expect(ids(page.events)).toEqual(ids(all.filter((e) => e.timestamp >= from && e.timestamp < to)))
      expect(page.events).toHaveLength(30)
      const offset = await queryAudit(store, org, { from: '2026-03-01T02:10:00+02:00', to, order: 'asc', limit: 10_000 })
      expect(ids(offset.events)).toEqual(ids(page.events))
    })

    it('scope narrows by user (the :own permissions) and by workspace', async () => {
      const own = await queryAudit(store, org, { limit: 10_000 }, { userId: 'usr_1' })
      expect(own.events.length).toBeGreaterThan(0)
      expect(own.events.every((e) => e.user_id === 'usr_1')).toBe(true)
      const ws = await queryAudit(store, org, { limit: 10_000 }, { workspaceId: 'ws_2' })
      expect(ids(ws.events).sort()).toEqual(ids(all.filter((e) => e.workspace_id === 'ws_2')).sort())
      expect(ws.events.some((e) => e.user_id !== 'usr_2')).toBe(true) // not narrowed by user
    })

    it('never returns another org’s events', async () => {
      const page = await queryAudit(store, org, { limit: 10_000 })
      expect(page.events.every((e) => e.org_id === org)).toBe(true)
      expect(await store.audit.getById(otherOrg, all[0].id)).toBeUndefined()
      expect(await queryAudit(store, orgId(), {})).toEqual({ events: [] })
    })

    it('refuses tampered, foreign and malformed cursors with invalid_cursor', async () => {
      const { cursor } = await queryAudit(store, org, { limit: 5, filter: 'decision=allow' })
      expect(cursor).toBeDefined()
      const c = cursor!
      const [body, sig] = c.split('.')
      const forged = Buffer.from(JSON.stringify([BASE, all[0].id])).toString('base64url')
      const flip = (s: string) => (s[0] === 'A' ? 'B' : 'A') + s.slice(1)
      for (const bad of [`${forged}.${sig}`, `${body}.${flip(sig)}`, `${flip(body)}.${sig}`, 'garbage', `${c}.x`, '.', 'a'.repeat(600)]) {
        await expectCode(queryAudit(store, org, { limit: 5, filter: 'decision=allow', cursor: bad }), 'invalid_cursor')
      }
      // Same cursor, different query, scope or org.
      await expectCode(queryAudit(store, org, { limit: 5, filter: 'decision=deny', cursor: c }), 'invalid_cursor')
      await expectCode(queryAudit(store, org, { limit: 5, cursor: c }), 'invalid_cursor')
      await expectCode(queryAudit(store, org, { limit: 5, filter: 'decision=allow', order: 'asc', cursor: c }), 'invalid_cursor')
      await expectCode(queryAudit(store, org, { limit: 5, filter: 'decision=allow', cursor: c }, { userId: 'usr_1' }), 'invalid_cursor')
      await expectCode(queryAudit(store, otherOrg, { limit: 5, filter: 'decision=allow', cursor: c }), 'invalid_cursor')
      // Filter order does not matter for the binding.
      const two = await queryAudit(store, org, { limit: 5, filter: ['decision=allow', 'method=GET'] })
      await expect(queryAudit(store, org, { limit: 5, filter: ['method=GET', 'decision=allow'], cursor: two.cursor })).resolves.toBeDefined()
    })

    it('validates limit, order, from and to', async () => {
      for (const limit of ['0', '10001', '-1', '1.5', 'ten', 0, 10_001]) {
        await expectCode(queryAudit(store, org, { limit }), 'validation_error')
      }
      expect((await queryAudit(store, org, { limit: '10000' })).events.length).toBe(240)
      await expectCode(queryAudit(store, org, { order: 'up' }), 'validation_error')
      await expectCode(queryAudit(store, org, { from: 'yesterday' }), 'validation_error')
      await expectCode(queryAudit(store, org, { to: '2026-13-45T00:00:00Z' }), 'validation_error')
      await expectCode(queryAudit(store, org, { from: '2026-03-02T00:00:00Z', to: '2026-03-01T00:00:00Z' }), 'validation_error')
      await expectCode(queryAudit(store, org, { order: ['asc', 'desc'] as never }), 'validation_error')
    })

    it('refuses unknown filter columns and malformed filters with invalid_query', async () => {
      for (const filter of ['user_id=usr_1', 'secret=x', 'decision', '=allow', 'decision=', 'decision=a,,b', '!=x', 'DECISION=allow']) {
        await expectCode(queryAudit(store, org, { filter }), 'invalid_query')
      }
    })

    it('fuzz: random filter combinations agree with the reference matcher', async () => {
      const valuesFor = (column: string) =>
        column === 'counter' ? ['tokens', 'requests', 'nope'] : ['allow', 'deny', 'ws_1', 'ws_2', 'chat', 'GET', '/v1/a', 'coder', 'http', 'dns', 'zzz']
      const clause = fc
        .record({ column: fc.constantFrom(...FILTER_COLUMNS), op: fc.constantFrom('=', '!='), n: fc.integer({ min: 0, max: 3 }), seed: fc.nat() })
        .map(({ column, op, n, seed }) => {
          const pool = valuesFor(column)
          const vals = Array.from({ length: n }, (_, i) => pool[(seed + i * 3) % pool.length])
          return op === '=' && vals.length === 0 ? `${column}=${pool[seed % pool.length]}` : `${column}${op}${vals.join(',')}`
        })
      await fc.assert(
        fc.asyncProperty(fc.array(clause, { maxLength: 3 }), async (filter) => {
          const page = await queryAudit(store, org, { filter, order: 'asc', limit: 10_000 })
          expect(ids(page.events)).toEqual(ids(all.filter((e) => matchesFilters(e, parseFilters(filter)))))
        }),
        { numRuns: 40 },
      )
    })
  })
}

describe('filter and cursor parsers (fuzz)', () => {
  it('parseFilters either parses or throws invalid_query, never anything else', () => {
    fc.assert(
      fc.property(fc.array(fc.string({ maxLength: 40 }), { maxLength: 4 }), (filters) => {
        try {
          const parsed = parseFilters(filters)
          for (const c of parsed) {
            expect(FILTER_COLUMNS).toContain(c.column)
            if (c.op !== 'populated') expect(c.values.length).toBeGreaterThan(0)
          }
        } catch (err) {
          expect(err).toBeInstanceOf(CorralError)
          expect((err as CorralError).code).toBe('invalid_query')
        }
      }),
      { numRuns: 500 },
    )
  })
})

for (const d of testDialects().slice(0, 1)) {
  describe(`cursor fuzz [${d.name}]`, () => {
    let store: Store
    beforeAll(async () => {
      store = await d.open()
    })
    afterAll(async () => {
      await store.close()
    })
    it('arbitrary cursor strings are refused with invalid_cursor', async () => {
      await fc.assert(
        fc.asyncProperty(fc.oneof(fc.string({ maxLength: 80 }), fc.base64String({ maxLength: 80 }).map((s) => `${s}.${s}`)), async (cursor) => {
          fc.pre(cursor !== '')
          await expectCode(queryAudit(store, 'org_f', { cursor }), 'invalid_cursor')
        }),
        { numRuns: 200 },
      )
    })
  })
}
