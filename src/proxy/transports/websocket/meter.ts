// WebSocket message metering on a relay that streams (relay.ts): each websocket.* counter takes
// its amount when the relay can know it, before the bytes it covers are sent on, so a budget can
// refuse them: `websocket.messages` 1 when a message begins (before its first frame is relayed),
// `websocket.bytes` each payload chunk as it is relayed, `websocket.message` (`value` over a JSON
// text message) when the message's last frame arrived, over a bounded copy of the message kept for
// it alone (before that last frame is relayed, so a message the ceiling refuses never arrives
// whole). Totals are what the ledger is debited at close; request.* counters of the same
// capability debit their request amount once, for the upgrade; response counters have no HTTP
// response to read and debit 0.
import type { FlooredReason } from '../../../contract/index.js'
import type { CompiledCounter, CounterValue } from '../../../policy/index.js'
import type { Budgets, Reservation } from '../../budgets.js'
import type { PolicyDenial } from '../../decision.js'
import type { MaybePromise } from '../../maybe.js'

type Direction = 'to_upstream' | 'to_agent'

export interface MessageAmount {
  counter: CompiledCounter
  amount: number
}

const EMPTY = Buffer.alloc(0)

export class MessageMeter {
  readonly #counters: readonly CompiledCounter[]
  readonly #messages: readonly CompiledCounter[]
  readonly #bytes: readonly CompiledCounter[]
  readonly #values: readonly CompiledCounter[]
  readonly #totals = new Map<string, number>()
  readonly #floored = new Map<string, FlooredReason>()

  constructor(counters: readonly CompiledCounter[]) {
    this.#counters = counters
    const ws = counters.filter((c) => c.phase === 'websocket')
    this.#messages = ws.filter((c) => c.source === 'websocket.messages')
    this.#bytes = ws.filter((c) => c.source === 'websocket.bytes')
    this.#values = ws.filter((c) => c.source === 'websocket.message')
  }

  /** Whether any counter meters messages (otherwise messages are relayed without a look). */
  get meters(): boolean {
    return this.#messages.length + this.#bytes.length + this.#values.length > 0
  }

  /** The `websocket.message` counter that reads this direction's messages whole, if any (its name, for the row). */
  reader(dir: Direction): string | undefined {
    return this.#values.find((c) => applies(c, dir))?.name
  }

  /** A message begins: 1 for each `websocket.messages` counter of its direction. */
  started(dir: Direction): MessageAmount[] {
    return this.#messages.filter((c) => applies(c, dir)).map((counter) => ({ counter, amount: 1 }))
  }

  /** `n` payload bytes are about to be relayed. */
  bytes(dir: Direction, n: number): MessageAmount[] {
    if (n === 0) return []
    return this.#bytes.filter((c) => applies(c, dir)).map((counter) => ({ counter, amount: n }))
  }

  /**
   * The message ended: `value` over it for each `websocket.message` counter of its direction
   * (`data` is the copy of a text message; a binary one is not copied and counts as unparseable).
   */
  ended(dir: Direction, text: boolean, data: Buffer | undefined): MessageAmount[] {
    const out: MessageAmount[] = []
    for (const c of this.#values) {
      if (!applies(c, dir)) continue
      const v = c.fromMessage({ direction: dir, text: text && data !== undefined, data: data ?? EMPTY })
      if (typeof v === 'number') {
        if (v > 0) out.push({ counter: c, amount: v })
        continue
      }
      if (!this.#floored.has(c.name)) this.#floored.set(c.name, v)
      if (c.failureCharge > 0) out.push({ counter: c, amount: c.failureCharge })
    }
    return out
  }

  /** Adds relayed amounts to the totals. */
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

/** Takes the amounts from the budgets, counter by counter; the first refusal wins. */
export function grow(budgets: Budgets, r: Reservation, amounts: readonly MessageAmount[]): MaybePromise<PolicyDenial | undefined> {
  let i = 0
  const step = (): MaybePromise<PolicyDenial | undefined> => {
    for (; i < amounts.length; i++) {
      const out = budgets.grow(r, amounts[i]!.counter.name, amounts[i]!.amount)
      if (out instanceof Promise) {
        i++
        return out.then((d) => d ?? step())
      }
      if (out) return out
    }
    return undefined
  }
  return step()
}

function applies(c: CompiledCounter, dir: Direction): boolean {
  const d = c.direction ?? 'both'
  return d === 'both' || d === dir
}
