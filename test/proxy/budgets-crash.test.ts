// Budgets through a crash, on both dialects (and a spent ceiling that is hammered): what a process knew must already be in the ledger
// when it dies. A "crash" is simulated by cutting the Budgets instance off its ledger (no flush, no
// lease return, nothing written afterwards) and starting a second instance on the same store.
import { afterAll, describe, expect, it } from 'vitest'
import { Budgets, Reservation } from '../../src/proxy/budgets.js'
import { makeCounter } from '../../src/policy/counters.js'
import type { CompiledCounter } from '../../src/policy/types.js'
import { budgetLedgers, type BudgetLedgers } from '../../src/store/budget-ledgers.js'
import { testDialects } from '../helpers/dialects.js'

/** A ledger that a test can take down (every call fails) or cut off for good (a dead process). */
function switchable(real: BudgetLedgers): { ledgers: BudgetLedgers; down: (v: boolean) => void; kill: () => void } {
  let down = false
  let dead = false
  const guard = <T>(f: () => Promise<T>): Promise<T> => {
    if (dead) return new Promise<T>(() => {}) // a dead process never reaches the database again
    if (down) return Promise.reject(new Error('ledger unreachable'))
    return f()
  }
  return {
    ledgers: {
      acquire: (...a) => guard(() => real.acquire(...a)),
      adjust: (...a) => guard(() => real.adjust(...a)),
      read: (...a) => real.read(...a),
    },
    down: (v) => (down = v),
    kill: () => (dead = true),
  }
}

const tokens = (max: number): CompiledCounter => makeCounter({
  name: 'tokens', capability: 'llm', source: 'response.bytes', phase: 'response_body',
  reservePerRequest: 0, failureCharge: 0, maxConcurrent: 0, statusCodes: ['2xx'], workspace: { max },
})
const calls = (max: number): CompiledCounter => makeCounter({
  name: 'calls', capability: 'llm', source: 'request.count', phase: 'request',
  reservePerRequest: 0, failureCharge: 0, maxConcurrent: 0, statusCodes: [], workspace: { max },
})
const KEY = (c: CompiledCounter): string => `ws_crash|ws|${c.capability}|${c.name}`

for (const d of testDialects()) {
  describe(`budgets through a crash [${d.name}]`, () => {
    // Only instances on a live ledger are closed at the end: a "dead" one never answers again.
    const live: Budgets[] = []
    afterAll(async () => {
      for (const b of live) await b.close()
    })
    const open = (ledgers: BudgetLedgers, closeAtEnd = false): Budgets => {
      const b = new Budgets(ledgers)
      if (closeAtEnd) live.push(b)
      return b
    }

    it('a debit beyond the lease is in the ledger once settle returns (a crash right after loses nothing)', async () => {
      const store = await d.open()
      const real = budgetLedgers(store)
      const sw = switchable(real)
      const c = tokens(1000)
      const a = open(sw.ledgers)
      const r = await a.reserve('org_x', 'ws_crash', undefined, [c], 0)
      expect(r).toBeInstanceOf(Reservation)
      // 50 is the lease (5 % of 1000); the response metered 400: 350 beyond what the lease held.
      const s = await a.settle(r as Reservation, new Map([['tokens', { value: 400 }]]))
      expect(s.debits).toEqual({ tokens: 400 })
      sw.kill()
      expect((await real.read(KEY(c)))!.used).toBeGreaterThanOrEqual(400)
    })

    it('after a crash between reservation and settlement, a new process admits only what is left', async () => {
      const store = await d.open()
      const real = budgetLedgers(store)
      const sw = switchable(real)
      const c = calls(40)
      const a = open(sw.ledgers)
      let admitted = 0
      for (let i = 0; i < 10; i++) {
        const r = await a.reserve('org_x', 'ws_crash', undefined, [c], 0)
        expect(r).toBeInstanceOf(Reservation)
        admitted++
        // The last one is in flight when the process dies: reserved, never settled.
        if (i < 9) await a.settle(r as Reservation, new Map([['calls', { value: 1 }]]))
      }
      sw.kill()
      const b = open(real, true)
      for (let i = 0; i < 100; i++) {
        const r = await b.reserve('org_x', 'ws_crash', undefined, [c], 0)
        if (!(r instanceof Reservation)) {
          expect(r.reason).toBe('budget_exhausted')
          break
        }
        admitted++
        await b.settle(r, new Map([['calls', { value: 1 }]]))
      }
      // Never past the ceiling; the dead process's unused lease stays counted as spent.
      expect(admitted).toBeLessThanOrEqual(40)
      expect(admitted).toBeGreaterThanOrEqual(40 - 2)
      expect((await real.read(KEY(c)))!.used).toBe(40)
    })

    it('a debit that could not be written keeps the scope closed until it is, then counts first', async () => {
      const store = await d.open()
      const real = budgetLedgers(store)
      const sw = switchable(real)
      const c = tokens(100)
      const a = open(sw.ledgers)
      const r = await a.reserve('org_x', 'ws_crash', undefined, [c], 0)
      sw.down(true)
      // The lease held 5; 90 more were spent upstream while the ledger was unreachable.
      await a.settle(r as Reservation, new Map([['tokens', { value: 95 }]]))
      await expect(a.reserve('org_x', 'ws_crash', undefined, [c], 0)).rejects.toThrow(/unreachable|ledger/)
      sw.down(false)
      // Back: the owed 90 is written before anything else is granted, so 5 are left, not 95.
      const next = await a.reserve('org_x', 'ws_crash', undefined, [c], 0)
      expect(next).toBeInstanceOf(Reservation)
      const done = await a.settle(next as Reservation, new Map([['tokens', { value: 5 }]]))
      expect(done.budgetState).toMatchObject({ tokens: { workspace: { used: 100, max: 100 } } })
      sw.kill()
      expect((await real.read(KEY(c)))!.used).toBe(100)
      const b = open(real, true)
      const refused = await b.reserve('org_x', 'ws_crash', undefined, [c], 0)
      expect(refused).not.toBeInstanceOf(Reservation)
    })

    it('a spent ceiling refuses locally: hammering it does not cost a ledger transaction per request', async () => {
      const store = await d.open()
      const real = budgetLedgers(store)
      let acquires = 0
      const counting: BudgetLedgers = { ...real, acquire: (...a) => (acquires++, real.acquire(...a)) }
      const c = calls(3)
      const a = open(counting, true)
      const outcomes = []
      for (let i = 0; i < 50; i++) {
        const r = await a.reserve('org_x', 'ws_crash', undefined, [c], 0)
        if (r instanceof Reservation) await a.settle(r, new Map([['calls', { value: 1 }]]))
        outcomes.push(r instanceof Reservation ? 'ok' : r.reason)
      }
      expect(outcomes.filter((o) => o === 'ok')).toHaveLength(3)
      expect(outcomes.filter((o) => o === 'budget_exhausted')).toHaveLength(47)
      expect(acquires).toBeLessThanOrEqual(4) // three grants of one unit, one refusal
    })
  })
}
