import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { auditStats, stamp, type StatsBucket } from '../../src/audit/index.js'
import { type AuditEvent, CorralError } from '../../src/contract/index.js'
import type { Store } from '../../src/store/index.js'
import { testDialects } from '../helpers/dialects.js'
import { decision, mutation, orgId } from './fixtures.js'

const BASE = Date.parse('2026-04-01T00:00:00.000Z')
const MIN = 60_000

/** 60 decisions over 3 hours (one every 3 minutes) plus a few mutations. */
function dataset(org: string): AuditEvent[] {
  const out: AuditEvent[] = []
  for (let i = 0; i < 60; i++) {
    out.push(
      stamp(
        decision(org, {
          timestamp: new Date(BASE + i * 3 * MIN).toISOString(),
          decision: i % 4 === 0 ? 'deny' : 'allow',
          reason: i % 4 === 0 ? 'budget_exhausted' : undefined,
          destination: i % 3 === 0 ? 'a.com' : i % 3 === 1 ? 'b.com' : 'c.com',
          latency_ms: i * 10,
          user_id: i % 2 ? 'usr_1' : 'usr_2',
          workspace_id: i < 30 ? 'ws_1' : 'ws_2',
          debits: i % 4 === 0 ? undefined : { tokens: i, requests: 1 },
          budget_state: { tokens: { used: i, remaining: 1000 - i } },
          detail: { model: 'm', usage: { output_tokens: i % 5 } },
        }),
      ),
    )
  }
  for (let i = 0; i < 5; i++) out.push(stamp(mutation(org, { timestamp: new Date(BASE + i * MIN).toISOString() })))
  return out
}

const sortBuckets = (b: StatsBucket[]) => [...b].sort((x, y) => JSON.stringify(x).localeCompare(JSON.stringify(y)))

for (const d of testDialects()) {
  describe(`audit stats [${d.name}]`, () => {
    let store: Store
    const org = orgId()
    let all: AuditEvent[]
    beforeAll(async () => {
      store = await d.open()
      all = dataset(org)
      await store.audit.insertBatch(all)
      await store.audit.insertBatch(dataset(orgId()))
    })
    afterAll(async () => {
      await store.close()
    })

    const stats = (q: Parameters<typeof auditStats>[2], scope?: Parameters<typeof auditStats>[3]) => auditStats(store, org, q, scope)
    const invalid = async (q: Parameters<typeof auditStats>[2], code = 'invalid_query') => {
      const err = await stats(q).then(() => undefined, (e: unknown) => e)
      expect(err, JSON.stringify(q)).toBeInstanceOf(CorralError)
      expect((err as CorralError).code, JSON.stringify(q)).toBe(code)
      expect((err as CorralError).status).toBe(400)
    }

    it('counts everything by default', async () => {
      expect(await stats({})).toEqual({ buckets: [{ group: {}, value: 65 }] })
    })

    it('group_by one and several dimensions, biggest first', async () => {
      const r = await stats({ group_by: 'event_type' })
      expect(r.buckets).toEqual([
        { group: { event_type: 'policy_decision' }, value: 60 },
        { group: { event_type: 'api_key_created' }, value: 5 },
      ])
      const two = await stats({ group_by: 'decision,destination', filter: 'event_type=policy_decision' })
      expect(two.buckets.reduce((s, b) => s + b.value, 0)).toBe(60)
      expect(two.buckets.find((b) => b.group.decision === 'deny' && b.group.destination === 'a.com')?.value).toBe(5)
      // An absent dimension value groups as the empty string.
      const reasons = await stats({ group_by: 'reason' })
      expect(sortBuckets(reasons.buckets)).toEqual(sortBuckets([{ group: { reason: '' }, value: 50 }, { group: { reason: 'budget_exhausted' }, value: 15 }]))
    })

    it('time_bucket fixed sizes and auto', async () => {
      const hourly = await stats({ time_bucket: '1h', filter: 'event_type=policy_decision' })
      expect(hourly.buckets).toEqual([0, 1, 2].map((h) => ({ group: {}, bucket: new Date(BASE + h * 60 * MIN).toISOString(), value: 20 })))
      const q15 = await stats({ time_bucket: '15m', group_by: 'decision', filter: 'event_type=policy_decision' })
      expect(q15.buckets.filter((b) => b.bucket === new Date(BASE).toISOString())).toEqual([
        { group: { decision: 'allow' }, bucket: new Date(BASE).toISOString(), value: 3 },
        { group: { decision: 'deny' }, bucket: new Date(BASE).toISOString(), value: 2 },
      ])
      // auto over a 3-hour span picks 5-minute buckets.
      const auto = await stats({ time_bucket: 'auto', from: new Date(BASE).toISOString(), to: new Date(BASE + 180 * MIN).toISOString() })
      expect(auto.buckets).toHaveLength(36)
      expect(auto.buckets.every((b) => (Date.parse(b.bucket!) - BASE) % (5 * MIN) === 0)).toBe(true)
      // auto without from sizes from the earliest matching event; a week-long span gets hourly buckets.
      const week = await stats({ time_bucket: 'auto', to: new Date(BASE + 6 * 24 * 60 * MIN).toISOString() })
      expect(week.buckets.map((b) => b.bucket)).toEqual([0, 1, 2].map((h) => new Date(BASE + h * 60 * MIN).toISOString()))
      const days = await stats({ time_bucket: '1d' })
      expect(days.buckets).toEqual([{ group: {}, bucket: new Date(BASE).toISOString(), value: 65 }])
    })

    it('bucket_by numeric ranges on a column and on a debits counter', async () => {
      const lat = await stats({ bucket_by: 'latency_ms:100,300' })
      expect(lat.buckets).toEqual([
        { group: {}, bucket: '[-inf,100)', value: 10 },
        { group: {}, bucket: '[100,300)', value: 20 },
        { group: {}, bucket: '[300,+inf)', value: 30 },
      ])
      const tok = await stats({ bucket_by: 'debits.tokens:10,20.5', group_by: 'decision' })
      // Events without the counter are not bucketed; denies carry no debits.
      expect(tok.buckets.every((b) => b.group.decision === 'allow')).toBe(true)
      expect(tok.buckets.reduce((s, b) => s + b.value, 0)).toBe(45)
      expect(tok.buckets.find((b) => b.bucket === '[10,20.5)')?.value).toBe(all.filter((e) => e.debits && e.debits.tokens >= 10 && e.debits.tokens < 20.5).length)
    })

    it('metrics: sum and avg over columns and JSON paths', async () => {
      const sumTokens = await stats({ metric: 'sum:debits.tokens', group_by: 'decision' })
      const expected = all.reduce((s, e) => s + (e.debits?.tokens ?? 0), 0)
      expect(sumTokens.buckets).toEqual([{ group: { decision: 'allow' }, value: expected }])
      const avgLat = await stats({ metric: 'avg:latency_ms', group_by: 'workspace_id' })
      expect(sortBuckets(avgLat.buckets)).toEqual(sortBuckets([{ group: { workspace_id: 'ws_1' }, value: 145 }, { group: { workspace_id: 'ws_2' }, value: 445 }]))
      const nested = await stats({ metric: 'sum:budget_state.tokens.remaining' })
      expect(nested.buckets[0].value).toBe(all.reduce((s, e) => s + (((e.budget_state?.tokens as { remaining?: number })?.remaining) ?? 0), 0))
      const detail = await stats({ metric: 'avg:detail.usage.output_tokens' })
      expect(detail.buckets[0].value).toBeCloseTo(2, 6)
      // No numeric value anywhere: no buckets rather than a zero row.
      expect((await stats({ metric: 'sum:detail.model' })).buckets).toEqual([])
    })

    it('top N of a dimension (added to the groups when missing)', async () => {
      const top = await stats({ top: '2:destination', metric: 'sum:latency_ms' })
      const sums = new Map<string, number>()
      for (const e of all) if (e.destination) sums.set(e.destination, (sums.get(e.destination) ?? 0) + (e.latency_ms ?? 0))
      const best = [...sums].sort((a, b) => b[1] - a[1]).slice(0, 2)
      expect(top.buckets).toEqual(best.map(([destination, value]) => ({ group: { destination }, value })))
      const series = await stats({ top: '1:destination', time_bucket: '1h', group_by: 'destination' })
      expect(new Set(series.buckets.map((b) => b.group.destination)).size).toBe(1)
    })

    it('top in one scan ranks like topValues + onlyValues for every metric', async () => {
      const cases = [
        { metric: { fn: 'count' as const }, groupBy: ['destination' as const, 'decision' as const], timeBucketMs: 3_600_000 },
        { metric: { fn: 'sum' as const, value: { column: 'debits' as const, path: ['tokens'] } }, groupBy: ['destination' as const], timeBucketMs: 900_000 },
        { metric: { fn: 'avg' as const, value: { column: 'latency_ms' as const } }, groupBy: ['user_id' as const, 'destination' as const] },
      ]
      for (const c of cases) {
        for (const n of [1, 2]) {
          const base = { filters: [], maxRows: 10_000, ...c }
          const values = await store.audit.topValues(org, base, 'destination', n)
          const twoPass = await store.audit.stats(org, { ...base, onlyValues: { dimension: 'destination', values } })
          const onePass = await store.audit.stats(org, { ...base, top: { dimension: 'destination', n } })
          expect(onePass, JSON.stringify({ c, n })).toEqual(twoPass)
          expect(new Set(onePass.map((r) => r.group[c.groupBy.indexOf('destination')])).size).toBe(n)
        }
      }
    })

    it('filter, from/to and scope narrow the input', async () => {
      const r = await stats({ filter: ['decision=deny'], from: new Date(BASE + 60 * MIN).toISOString() })
      expect(r.buckets[0].value).toBe(all.filter((e) => e.decision === 'deny' && Date.parse(e.timestamp) >= BASE + 60 * MIN).length)
      const own = await stats({}, { userId: 'usr_1' })
      expect(own.buckets[0].value).toBe(30)
      const ws = await stats({ group_by: 'workspace_id' }, { workspaceId: 'ws_2' })
      expect(ws.buckets).toEqual([{ group: { workspace_id: 'ws_2' }, value: 30 }])
    })

    it('refuses anything outside the grammar with invalid_query', async () => {
      for (const q of [
        { group_by: 'secret' }, { group_by: 'decision,decision' }, { group_by: 'a,b,c,d,e,f' },
        { group_by: 'event_type,category,actor,user_id,decision,reason' },
        { metric: 'max:latency_ms' }, { metric: 'sum:' }, { metric: 'sum:org_id' }, { metric: 'sum:detail' },
        { metric: 'avg:debits.a.b' }, { metric: 'sum:detail.$bad' }, { metric: "sum:detail.a') or 1=1--" },
        { time_bucket: '2h' }, { bucket_by: 'latency_ms' }, { bucket_by: 'latency_ms:' }, { bucket_by: 'latency_ms:5,1' },
        { bucket_by: 'latency_ms:a' }, { bucket_by: 'path:1,2' }, { bucket_by: 'latency_ms:1', time_bucket: '1h' },
        { top: '0:destination' }, { top: 'x:destination' }, { top: '5:nope' }, { top: '5' }, { filter: 'nope=1' },
      ]) {
        await invalid(q)
      }
      await invalid({ from: 'soon' }, 'validation_error')
    })
  })
}
