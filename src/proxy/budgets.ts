// Budgets: reservations at admission, debits at the terminal phase, ledgers in the store.
//
// The hot path never waits on the database except to refill a lease (docs/proxy.md, "Budgets"):
//  - a counter scope with a ceiling (max > 0) is served from a local *lease*: allowance taken from
//    the store ledger atomically (`acquire`), LEASE_FRACTION of the ceiling at a time (at least
//    what the request needs). Reserving and debiting within the lease is synchronous, so parallel
//    requests in one process cannot both spend the same unit, and processes sharing one database
//    cannot spend the same unit either: each unit is granted to one lease only;
//  - unlimited scopes (max 0) are written behind, in one batch every FLUSH_MS; unused leases are
//    returned on stop, eviction and window change.
// Crash safety (docs/reliability.md, "Budgets through crashes"): the ledger must never hold less
// than what was spent against a ceiling. A lease is in the ledger before any of it is reserved, so
// every reservation is durable before its request is forwarded, and a crash keeps the unused rest
// counted as spent (conservative, never returned). A debit beyond what the lease held (a response
// that metered more than its reservation) is written to the ledger before `settle` resolves, so
// before the request's decision row and the end of its answer; while such a debit is unwritten
// (ledger unreachable) its scope grants nothing, and it is written before the next grant.
// Worst-case overshoot of a ceiling: a response counter's actual debit can exceed what was
// reserved for it (the tokens were already spent upstream), so the ledger may pass `max` by at most
// the sum over in-flight requests of (actual − reserve_per_request); the next admission is then
// refused. The same bound covers requests in flight at a crash, whose metered amount nobody knows.
import type { CompiledCounter, CounterValue } from '../policy/index.js'
import type { FlooredReason } from '../contract/index.js'
import type { BudgetLedgers, LedgerKey } from '../store/index.js'
import { deny, type PolicyDenial } from './decision.js'
import { Slot } from './budget-slot.js'
import { andThen, untilDenied, type MaybePromise } from './maybe.js'

const LEASE_FRACTION = 0.05
const FLUSH_MS = 100
/**
 * After the ledger refused a refill, requests that the lease cannot cover are refused locally for
 * this long instead of each asking the database: an agent hammering a spent ceiling must not turn
 * every request into a locked ledger transaction (on Postgres it starved the pool for everyone).
 */
const EXHAUSTED_RECHECK_MS = 500

type ScopeName = 'workspace' | 'task'

/**
 * `max_concurrent` across processes (several serve replicas): permits of a counter held per
 * process in the database (src/store/replica-leases.ts `concurrencyPermits`), never more than
 * `max` among live holders together. A process takes one when its own are all in use and gives
 * back the ones it no longer uses at the next flush (FLUSH_MS), so a steady stream reuses its
 * permits without a database round trip. Without it, `max_concurrent` is per process.
 */
export interface ConcurrencyPermitSource {
  take(key: string, max: number, want: number): Promise<number>
  give(key: string, n: number): Promise<void>
}

interface Held { slot: Slot; amount: number }
interface CounterHold {
  counter: CompiledCounter
  scopes: { scope: ScopeName; held: Held }[]
  concurrencySlot: Slot
  /** The request holds one of the slot's database permits. */
  permit: boolean
}

/** What one request holds between admission and the terminal phase. */
export class Reservation {
  settled = false
  constructor(readonly holds: CounterHold[]) {}
}
export interface Settlement {
  debits: Record<string, number>
  budgetState: Record<string, unknown>
  floored: Record<string, FlooredReason>
}

export class Budgets {
  readonly #ledgers: BudgetLedgers
  readonly #permits: ConcurrencyPermitSource | undefined
  readonly #slots = new Map<string, Slot>()
  readonly #wsSlots = new WeakMap<CompiledCounter, Map<string, Slot>>()
  readonly #timer: NodeJS.Timeout
  #flushing: Promise<void> = Promise.resolve()

  constructor(ledgers: BudgetLedgers, permits?: ConcurrencyPermitSource) {
    this.#ledgers = ledgers
    this.#permits = permits
    this.#timer = setInterval(() => void this.flush(), FLUSH_MS)
    this.#timer.unref()
  }

  #slot(orgId: string, workspaceId: string, scope: string, counter: CompiledCounter, max: number, ttlMs: number | undefined): Slot {
    const key = `${workspaceId}|${scope}|${counter.capability}|${counter.name}`
    let s = this.#slots.get(key)
    if (!s) {
      s = new Slot({ key, orgId, workspaceId, ...(ttlMs ? { ttlMs } : {}) }, max)
      this.#slots.set(key, s)
    }
    return this.#renewed(s, ttlMs)
  }

  /** The counter's workspace-scope slot, found without building its key (cached per counter until `close` drops it). */
  #wsSlot(orgId: string, workspaceId: string, counter: CompiledCounter): Slot {
    const ttlMs = counter.workspace?.ttlMs
    const cached = this.#wsSlots.get(counter)?.get(workspaceId)
    if (cached && !cached.dropped) return this.#renewed(cached, ttlMs)
    const s = this.#slot(orgId, workspaceId, 'ws', counter, counter.workspace?.max ?? 0, ttlMs)
    let byWorkspace = this.#wsSlots.get(counter)
    if (!byWorkspace) this.#wsSlots.set(counter, (byWorkspace = new Map()))
    byWorkspace.set(workspaceId, s)
    s.cachedIn.push(byWorkspace)
    return s
  }

  #renewed(s: Slot, ttlMs: number | undefined): Slot {
    // A ttl window that ended locally: the lease belonged to the old window (the ledger resets).
    if (ttlMs && s.windowStart && Date.now() - s.windowStart >= ttlMs) {
      s.lease = 0
      s.dbUsed = 0
      s.windowStart = 0
      s.exhaustedUntil = 0
    }
    return s
  }

  /**
   * Reserves, for each counter of the matched capability, its request amount plus
   * reserve_per_request in every scope that applies (the workspace's, then the task's), and its
   * max_concurrent slot. Refuses with concurrency_exhausted or budget_exhausted (detail.counter,
   * detail.scope), giving back what it held. Without a promise while every hold fits in its lease
   * and no permit must come from the database (the usual case); a promise when a lease must be
   * refilled or a permit taken.
   */
  reserve(orgId: string, workspaceId: string, taskId: string | undefined, counters: readonly CompiledCounter[], requestBytes: number, mcpTools?: readonly string[]): MaybePromise<Reservation | PolicyDenial> {
    const reservation = new Reservation([])
    // Counter by counter without a closure per request; the rest goes on after the first that waits.
    for (let i = 0; i < counters.length; i++) {
      const held = this.#hold(reservation, counters[i]!, orgId, workspaceId, taskId, requestBytes, mcpTools)
      if (held instanceof Promise) return this.#reserveAfter(held, reservation, counters, i + 1, orgId, workspaceId, taskId, requestBytes, mcpTools)
      if (held) {
        this.#release(reservation)
        return held
      }
    }
    return reservation
  }

  async #reserveAfter(first: Promise<PolicyDenial | undefined>, reservation: Reservation, counters: readonly CompiledCounter[], next: number, orgId: string, workspaceId: string, taskId: string | undefined, requestBytes: number, mcpTools?: readonly string[]): Promise<Reservation | PolicyDenial> {
    try {
      let denied = await first
      for (let i = next; !denied && i < counters.length; i++) {
        // A hold that answers at once is taken in the same turn as the one before it.
        const held = this.#hold(reservation, counters[i]!, orgId, workspaceId, taskId, requestBytes, mcpTools)
        denied = held instanceof Promise ? await held : held
      }
      if (!denied) return reservation
      this.#release(reservation)
      return denied
    } catch (err) {
      this.#release(reservation)
      throw err
    }
  }

  /** One counter's holds: its max_concurrent slot (and database permit), then its scopes. */
  #hold(r: Reservation, counter: CompiledCounter, orgId: string, workspaceId: string, taskId: string | undefined, requestBytes: number, mcpTools?: readonly string[]): MaybePromise<PolicyDenial | undefined> {
    const amount = counter.requestAmount(requestBytes, mcpTools) + counter.reservePerRequest
    const ws = this.#wsSlot(orgId, workspaceId, counter)
    const task = taskId && counter.task ? this.#slot(orgId, workspaceId, `task:${taskId}`, counter, counter.task.max, counter.task.ttlMs) : undefined
    if (counter.maxConcurrent > 0 && ws.inFlight >= counter.maxConcurrent) return concurrencyExhausted(counter)
    const hold: CounterHold = { counter, scopes: [], concurrencySlot: ws, permit: false }
    r.holds.push(hold)
    ws.inFlight++
    if (counter.maxConcurrent === 0 || !this.#permits) return this.#holdScopes(hold, ws, task, amount)
    return andThen(this.#takePermit(ws, counter.maxConcurrent), (ok) => {
      if (!ok) return concurrencyExhausted(counter)
      hold.permit = true
      return this.#holdScopes(hold, ws, task, amount)
    })
  }

  #holdScopes(hold: CounterHold, ws: Slot, task: Slot | undefined, amount: number): MaybePromise<PolicyDenial | undefined> {
    // Something must be left even when nothing is reserved up front (a response counter without
    // reserve_per_request): a spent ceiling refuses the next request. A count of MCP tool calls
    // refuses only the calls it counts: a request that calls none of its tools needs nothing.
    const need = hold.counter.source === 'mcp.calls' ? amount : Math.max(amount, 1)
    const d = this.#holdScope(hold, 'workspace', ws, need, amount)
    if (!task) return d
    return d instanceof Promise ? d.then((x) => x ?? this.#holdScope(hold, 'task', task, need, amount)) : d ?? this.#holdScope(hold, 'task', task, need, amount)
  }

  #holdScope(hold: CounterHold, scope: ScopeName, slot: Slot, need: number, amount: number): MaybePromise<PolicyDenial | undefined> {
    if (slot.max <= 0) {
      hold.scopes.push({ scope, held: { slot, amount } })
      return undefined
    }
    const took = this.#take(slot, need, amount)
    if (took instanceof Promise) return took.then((ok) => scopeHeld(hold, scope, slot, amount, ok))
    return scopeHeld(hold, scope, slot, amount, took)
  }

  /**
   * Takes `amount` from the slot's lease once at least `need` is there, refilling the lease from
   * the ledger when short (a promise then). The check and the take happen in one synchronous step:
   * several waiters woken by one refill must not all see the same units.
   */
  #take(slot: Slot, need: number, amount: number): MaybePromise<boolean> {
    if (slot.lease >= need) {
      slot.lease -= amount
      return true
    }
    return this.#refill(slot, need, amount)
  }

  async #refill(slot: Slot, need: number, amount: number): Promise<boolean> {
    if (slot.acquiring) {
      await slot.acquiring
      return this.#take(slot, need, amount)
    }
    if (Date.now() < slot.exhaustedUntil) return false
    // An owed debit goes into the ledger before the ledger grants anything more.
    if (slot.pending > 0) {
      await this.flush()
      if (slot.pending > 0) throw new Error('budget ledger unreachable: an owed debit is not written yet')
      return this.#take(slot, need, amount)
    }
    const want = Math.max(need - slot.lease, Math.ceil(slot.max * LEASE_FRACTION))
    let granted = 0
    slot.acquiring = this.#ledgers.acquire(slot.k, slot.max, want).then(({ granted: g, snapshot }) => {
      granted = g
      if (slot.windowStart && snapshot.windowStart !== slot.windowStart) slot.lease = 0
      slot.lease += g
      slot.dbUsed = snapshot.used
      slot.windowStart = snapshot.windowStart
    }).finally(() => {
      slot.acquiring = undefined
    })
    await slot.acquiring
    if (granted === 0 && slot.lease < need) {
      slot.exhaustedUntil = Date.now() + EXHAUSTED_RECHECK_MS
      return false
    }
    return this.#take(slot, need, amount)
  }

  /** One of the slot's database permits for this request: a spare one, else one more from the database (a promise then). */
  #takePermit(slot: Slot, max: number): MaybePromise<boolean> {
    // Counted as a user before any await, so parallel requests each take their own permit.
    slot.permitUsers++
    if (slot.permits >= slot.permitUsers) return true
    return this.#permits!.take(slot.k.key, max, 1).catch(() => 0).then((got) => {
      slot.permits += got
      if (got > 0) return true
      slot.permitUsers--
      return false
    })
  }

  /** Returns every held amount (the request was denied or failed before any debit). */
  #release(r: Reservation): void {
    for (const h of r.holds) {
      if (h.permit) h.concurrencySlot.permitUsers = Math.max(0, h.concurrencySlot.permitUsers - 1)
      h.concurrencySlot.inFlight = Math.max(0, h.concurrencySlot.inFlight - 1)
      for (const { held } of h.scopes) if (held.slot.max > 0) held.slot.lease += held.amount
    }
  }

  /**
   * Adds `amount` to what a reservation holds for one counter, while its request is still open (a
   * WebSocket message metered mid-connection): taken from each ceiling scope's lease like a
   * reservation, the lease refilled from the ledger when short (a promise then). budget_exhausted
   * when a scope cannot cover it; what an earlier scope took stays held and is returned at settle.
   */
  grow(r: Reservation, counterName: string, amount: number): MaybePromise<PolicyDenial | undefined> {
    const h = r.holds.find((x) => x.counter.name === counterName)
    if (!h || amount <= 0 || r.settled) return undefined
    return untilDenied(h.scopes, ({ scope, held }) => {
      if (held.slot.max <= 0) {
        held.amount += amount
        return undefined
      }
      return andThen(this.#take(held.slot, amount, amount), (ok) => {
        if (!ok) return deny('budget_exhausted', { counter: counterName, scope, max: held.slot.max, used: held.slot.used() }, 429)
        held.amount += amount
        return undefined
      })
    })
  }

  release(r: Reservation): void {
    if (r.settled) return
    r.settled = true
    this.#release(r)
  }

  /**
   * Commits the actual debits (by counter name) against the holds; returns the row's budget
   * columns. Without a promise when no debit is owed to the ledger (the usual case); else a
   * promise that resolves once every debit against a ceiling is in the ledger (or owed, when the
   * ledger is unreachable: see #refill). Never rejects.
   */
  settle(r: Reservation, actual: ReadonlyMap<string, CounterValue>): MaybePromise<Settlement> {
    const out: Settlement = { debits: {}, budgetState: {}, floored: {} }
    if (r.settled) return out
    r.settled = true
    let owed = false
    for (const h of r.holds) {
      if (h.permit) h.concurrencySlot.permitUsers = Math.max(0, h.concurrencySlot.permitUsers - 1)
      h.concurrencySlot.inFlight = Math.max(0, h.concurrencySlot.inFlight - 1)
      const v = actual.get(h.counter.name) ?? { value: 0 }
      const debit = Math.max(0, Math.floor(v.value))
      out.debits[h.counter.name] = debit
      if (v.floored) out.floored[h.counter.name] = v.floored
      const state: Record<string, unknown> = {}
      for (const { scope, held } of h.scopes) {
        const slot = held.slot
        if (slot.max > 0) {
          if (debit <= held.amount) slot.lease += held.amount - debit
          else {
            const extra = debit - held.amount
            const fromLease = Math.min(slot.lease, extra)
            slot.lease -= fromLease
            if (extra > fromLease) {
              slot.pending += extra - fromLease
              owed = true
            }
          }
        } else slot.pending += debit
        const used = slot.used()
        state[scope] = slot.max > 0 ? { used, max: slot.max, remaining: Math.max(0, slot.max - used) } : { used, max: slot.max }
      }
      out.budgetState[h.counter.name] = state
    }
    return owed ? this.flush().then(() => out) : out
  }

  /** Writes pending debits (write-behind) and gives back unused permits. Never concurrent with itself. */
  flush(): Promise<void> {
    this.#flushing = this.#flushing.then(async () => {
      await this.#givePermits()
      const items: { k: LedgerKey; delta: number; slot: Slot }[] = []
      for (const slot of this.#slots.values()) if (slot.pending !== 0) items.push({ k: slot.k, delta: slot.pending, slot })
      if (!items.length) return
      for (const it of items) it.slot.pending -= it.delta
      try {
        const snaps = await this.#ledgers.adjust(items)
        for (const it of items) {
          const s = snaps.get(it.k.key)
          if (s) it.slot.dbUsed = s.used
        }
      } catch {
        for (const it of items) it.slot.pending += it.delta // retried next tick; nothing is dropped
      }
    })
    return this.#flushing
  }

  /** Permits no request uses go back to the database (a failed give keeps them for the next flush). */
  async #givePermits(): Promise<void> {
    if (!this.#permits) return
    for (const slot of this.#slots.values()) {
      const spare = slot.permits - slot.permitUsers
      if (spare <= 0) continue
      slot.permits -= spare
      await this.#permits.give(slot.k.key, spare).catch(() => {
        slot.permits += spare
      })
    }
  }

  /** Flushes and returns unused leases to the ledger (stop, or a workspace torn down). */
  async close(workspaceId?: string): Promise<void> {
    if (!workspaceId) clearInterval(this.#timer)
    await this.flush()
    const returns: { k: LedgerKey; delta: number; leasedInWindow: number }[] = []
    for (const [key, slot] of this.#slots) {
      if (workspaceId && slot.k.workspaceId !== workspaceId) continue
      if (slot.inFlight > 0) continue
      if (slot.lease > 0) returns.push({ k: slot.k, delta: -slot.lease, leasedInWindow: slot.windowStart })
      this.#slots.delete(key)
      slot.dropped = true
      for (const m of slot.cachedIn) if (m.get(slot.k.workspaceId) === slot) m.delete(slot.k.workspaceId)
    }
    if (returns.length) await this.#ledgers.adjust(returns)
  }
}

/** A scope's hold once its lease answered: held, or budget_exhausted. */
function scopeHeld(hold: CounterHold, scope: ScopeName, slot: Slot, amount: number, ok: boolean): PolicyDenial | undefined {
  if (ok) hold.scopes.push({ scope, held: { slot, amount } })
  return ok ? undefined : deny('budget_exhausted', { counter: hold.counter.name, scope, max: slot.max, used: slot.used() }, 429)
}

function concurrencyExhausted(counter: CompiledCounter): PolicyDenial {
  return deny('concurrency_exhausted', { counter: counter.name, scope: 'workspace', max_concurrent: counter.maxConcurrent }, 429)
}
