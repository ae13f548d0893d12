// When the appender may run a round (docs/audit.md "Pacing: the appender yields to the writer").
// Appending trails the writer by design, so while this process's writer has a backlog (a full
// batch or more waiting for the database) the appender takes neither the cores nor, on SQLite, the
// write lock the writer needs: it appends when the writer is idle, or once its lag passes a bound
// in rows or in seconds, so a writer that is never idle cannot keep the log from growing.
import type { Store } from '../../store/index.js'

/** Rows queued for the log beyond which the appender appends through a backlog. */
export const MAX_LAG_ROWS = 500_000
/** How long a queued row may wait before the appender appends through a backlog. */
export const MAX_LAG_MS = 30_000

export interface PaceOptions {
  maxLagRows?: number
  maxLagMs?: number
}

export class AppendPacer {
  readonly #busy: () => boolean
  readonly #maxRows: number
  readonly #maxMs: number
  /** When the queue's tail was first seen at each seq, ascending: the head's wait is read from it. */
  #seen: Array<{ seq: number; at: number }> = []

  constructor(busy: () => boolean, o: PaceOptions = {}) {
    this.#busy = busy
    this.#maxRows = Math.max(1, o.maxLagRows ?? MAX_LAG_ROWS)
    this.#maxMs = Math.max(0, o.maxLagMs ?? MAX_LAG_MS)
  }

  /**
   * Whether a round may run now: the writer has no backlog, or the queue's lag has reached a bound.
   * An idle writer costs no read; a busy one two index reads per round.
   */
  async admit(store: Store, now = Date.now()): Promise<boolean> {
    if (!this.#busy()) return true
    const extent = await store.auditLog.queueExtent()
    if (!extent) {
      this.#seen = []
      return false
    }
    // A tail behind the last one seen: the queue was emptied and its seqs began again.
    if ((this.#seen.at(-1)?.seq ?? 0) > extent.tail) this.#seen = []
    const last = this.#seen.at(-1)
    if (!last || last.seq < extent.tail) this.#seen.push({ seq: extent.tail, at: now })
    // The first time a tail at or past the head was seen: the head row was committed by then (a
    // tick late at most, and never earlier than this process began watching).
    while (this.#seen.length > 1 && this.#seen[0]!.seq < extent.head) this.#seen.shift()
    const waitedMs = now - this.#seen[0]!.at
    return extent.tail - extent.head + 1 >= this.#maxRows || waitedMs >= this.#maxMs
  }
}
