// Budgets through kill -9 (issue 14 §2): agents spend two ceilings (a request counter and a
// response-metered token counter, reserve 0) while `serve` is killed with SIGKILL twice and started
// again; a last run spends what is left. The upstream counts what it really served (the spend).
// Never past a ceiling: served calls ≤ max; served tokens ≤ max + the documented in-flight
// overshoot; and the ledger never holds less than what answered requests debited.
import { afterAll, describe, expect, it } from 'vitest'
import { TOKENS_PER_RESPONSE, agentLoad, chaosCaps, seedWorkspace, startChaos, until, type Chaos, type Tally } from './harness.js'
import { chaosDialects } from './dialects.js'

const CALLS = 60
const TOKENS = 280
const PER_ROUND = 16
const CONCURRENCY = 6
const KILLS = 2

async function ledger(c: Chaos, workspaceId: string, capability: string): Promise<number> {
  return c.store(async (s) => {
    const db = s.db as unknown as import('kysely').Kysely<{ budget_ledgers: { key: string; used: number | string } }>
    const row = await db.selectFrom('budget_ledgers').select('used').where('key', '=', `${workspaceId}|ws|${capability}|${capability}`).executeTakeFirst()
    return Number(row?.used ?? 0)
  })
}

for (const d of chaosDialects('chaos/budgets.test.ts')) {
  describe(`budgets through kill -9 [${d.name}]`, () => {
    let c: Chaos | undefined
    afterAll(async () => {
      await c?.close()
      await d.drop()
    })

    it('no spend past a ceiling, and every answered debit is in the ledger', async () => {
      const db = await d.create()
      c = await startChaos(db ? { db } : {})
      const chaos = c
      const ws = await seedWorkspace(c, chaosCaps(c.upstream.port, { calls: CALLS, tokens: TOKENS }))
      const t: Tally = { answered: [], failed: 0 }
      const load = (stop: AbortSignal): Promise<Tally> => agentLoad({
        tally: t, proxyUrl: () => chaos.proxyUrl, token: ws.token, caPem: ws.caPem, port: chaos.upstream.port,
        prefixes: ['calls', 'tokens'], concurrency: CONCURRENCY, stop, method: 'GET',
      })
      const count = (p: string, status: number): number => t.answered.filter((a) => a.status === status && a.path.startsWith(`/${p}/`)).length
      // Each round is killed once it has spent something (however slow the machine is; bounded).
      for (let k = 0; k < KILLS; k++) {
        const stop = new AbortController()
        const spent = t.answered.filter((a) => a.status === 200).length
        const running = load(stop.signal)
        await until(() => t.answered.filter((a) => a.status === 200).length - spent >= PER_ROUND, 10_000)
        await c.kill9()
        stop.abort()
        await running
        await c.restart()
      }
      // The last run spends the rest: it stops once both counters refuse (bounded).
      const stop = new AbortController()
      const running = load(stop.signal)
      await until(() => count('calls', 429) >= 5 && count('tokens', 429) >= 5, 30_000)
      stop.abort()
      await running
      // A clean stop returns unused leases, so the ledgers read what was really granted.
      await c.serve.stop({ keepDataDir: true })

      const answered = t.answered
      const ok = (p: string) => answered.filter((a) => a.status === 200 && a.path.startsWith(`/${p}/`)).length
      const refused = (p: string) => answered.filter((a) => a.status === 429 && a.path.startsWith(`/${p}/`)).length
      const servedCalls = c.upstream.served.get('calls') ?? 0
      const servedTokens = (c.upstream.served.get('tokens') ?? 0) * TOKENS_PER_RESPONSE
      const ledgerCalls = await ledger(c, ws.workspaceId, 'calls')
      const ledgerTokens = await ledger(c, ws.workspaceId, 'tokens')
      const summary = {
        dialect: d.name, kills: KILLS,
        calls: { max: CALLS, served: servedCalls, answered_200: ok('calls'), answered_429: refused('calls'), ledger: ledgerCalls },
        tokens: { max: TOKENS, served: servedTokens, answered_200_tokens: ok('tokens') * TOKENS_PER_RESPONSE, answered_429: refused('tokens'), ledger: ledgerTokens },
      }
      const avgMs = (p: string) => {
        const xs = answered.filter((a) => a.path.startsWith(`/${p}/`))
        return Math.round(xs.reduce((n, a) => n + a.ms, 0) / Math.max(1, xs.length))
      }
      console.log(`chaos budgets ${JSON.stringify(summary)} avg_ms calls ${avgMs('calls')} tokens ${avgMs('tokens')}`)

      // Request counter: reserved from a lease that is in the ledger before forwarding: exact bound.
      expect(servedCalls).toBeLessThanOrEqual(CALLS)
      expect(ledgerCalls).toBe(CALLS)
      // What a kill may cost: the dead process's unused lease (5 % of the ceiling) and the units
      // reserved by requests that died before they were forwarded. Never more.
      expect(servedCalls).toBeGreaterThanOrEqual(CALLS - KILLS * (Math.ceil(CALLS * 0.05) + CONCURRENCY))
      expect(refused('calls')).toBeGreaterThan(0)
      // Response counter (reserve 0): the ledger holds every answered debit; the spend passes the
      // ceiling only by responses in flight when it was reached or when serve died.
      expect(ledgerTokens).toBeGreaterThanOrEqual(ok('tokens') * TOKENS_PER_RESPONSE)
      expect(servedTokens).toBeLessThanOrEqual(TOKENS + (KILLS + 1) * CONCURRENCY * TOKENS_PER_RESPONSE)
      expect(refused('tokens')).toBeGreaterThan(0)
    })
  })
}
