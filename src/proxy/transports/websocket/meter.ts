// WebSocket message metering: each relayed message is measured by the capability's websocket.*
// counters (per message, per byte, or `value` over a JSON text message) before it is sent on, so
// the budget can refuse the message that would pass a ceiling. Totals are what the ledger is
// debited at close; request.* counters of the same capability debit their request amount once,
// for the upgrade; response counters have no HTTP response to read and debit 0.
import type { FlooredReason } from '../../../contract/index.js'
import type { CompiledCounter, CounterValue, MessageView } from '../../../policy/index.js'

export interface MessageAmount {
  counter: CompiledCounter
  amount: number
}

export class MessageMeter {
  readonly #counters: readonly CompiledCounter[]
  readonly #messageCounters: readonly CompiledCounter[]
  readonly #totals = new Map<string, number>()
  readonly #floored = new Map<string, FlooredReason>()

  constructor(counters: readonly CompiledCounter[]) {
    this.#counters = counters
    this.#messageCounters = counters.filter((c) => c.phase === 'websocket')
  }

  /** Whether any counter meters messages (otherwise messages are relayed without a look). */
  get meters(): boolean {
    return this.#messageCounters.length > 0
  }

  /** What the message adds to each websocket counter (only non-zero amounts). Nothing is committed yet. */
  measure(message: MessageView): MessageAmount[] {
    const out: MessageAmount[] = []
    for (const c of this.#messageCounters) {
      const v = c.fromMessage(message)
      if (typeof v === 'number') {
        if (v > 0) out.push({ counter: c, amount: v })
        continue
      }
      if (!this.#floored.has(c.name)) this.#floored.set(c.name, v)
      if (c.failureCharge > 0) out.push({ counter: c, amount: c.failureCharge })
    }
    return out
  }

  /** Adds a relayed message's amounts to the totals. */
  commit(amounts: readonly MessageAmount[]): void {
    for (const { counter, amount } of amounts) this.#totals.set(counter.name, Math.min((this.#totals.get(counter.name) ?? 0) + amount, Number.MAX_SAFE_INTEGER))
  }

  /** The debits of the whole connection (budgets.settle). */
  values(): Map<string, CounterValue> {
    const out = new Map<string, CounterValue>()
    for (const c of this.#counters) {
      if (c.phase === 'request') out.set(c.name, { value: c.requestAmount(0) })
      else if (c.phase === 'websocket') {
        const floored = this.#floored.get(c.name)
        out.set(c.name, { value: this.#totals.get(c.name) ?? 0, ...(floored ? { floored } : {}) })
      } else out.set(c.name, { value: 0 })
    }
    return out
  }
}
