// When the appender may run a round, and how large and how close together its rounds are
// (docs/audit.md "Pacing: the appender yields to the writer", "Catch-up in slices"). Appending
// trails the writer by design, so while this process's writer has a backlog (a full batch or more
// waiting for the database) the appender takes neither the cores nor, on SQLite, the write lock
// the writer needs: it appends when the writer is idle, or once its lag passes a bound in rows or
// in seconds, so a writer that is never idle cannot keep the log from growing. Within the bounds a
// tick that finds more than a slice queued catches up in slices with a pause after each as long as
// the slice ran: half a core on average, never a core for seconds, so the proxy's answers keep a
// core while the log catches up after a burst. Past a bound the rounds run back to back again.
import type { Store } from '../../store/index.js'

/** Rows queued for the log beyond which the appender appends through a backlog. */
export const MAX_LAG_ROWS = 500_000
/** How long a queued row may wait before the appender appends through a backlog. */
export const MAX_LAG_MS = 30_000

/** Queue entries per round while catching up within the bounds: about 30 ms of a core. */
export const SLICE_ROWS = 1_000
/** The share of one core a catch-up within the bounds takes on average (a pause after each slice). */
export const SLICE_SHARE = 0.5
/** The longest pause after a slice (a slice descheduled for long on a loaded machine pauses no longer). */
const MAX_PAUSE_MS = 1_000

export interface PaceOptions {
  maxLagRows?: number
  maxLagMs?: number
  /** Queue entries per round while catching up within the bounds (default SLICE_ROWS). */
  sliceRows?: number
  /** The share of a core a catch-up within the bounds takes, 0 < share ≤ 1 (default SLICE_SHARE; 1: no pause). */
  sliceShare?: number
}

export class AppendPacer {
  readonly #busy: () => boolean
  readonly #maxRows: number
  readonly #maxMs: number
  /** Rows per round within the bounds, and the pause after a slice per ms it ran. */
  readonly sliceRows: number
  readonly #pausePerMs: number
  /** When the queue's tail was first seen at each seq, ascending: the head's wait is read from it. */
  #seen: Array<{ seq: number; at: number }> = []

  constructor(busy: () => boolean, o: PaceOptions = {}) {
    this.#busy = busy
    this.#maxRows = Math.max(1, o.maxLagRows ?? MAX_LAG_ROWS)
    this.#maxMs = Math.max(0, o.maxLagMs ?? MAX_LAG_MS)
    this.sliceRows = Math.max(1, o.sliceRows ?? SLICE_ROWS)
    const share = Math.min(1, Math.max(0.01, o.sliceShare ?? SLICE_SHARE))
    this.#pausePerMs = 1 / share - 1
  }

  /** Whether this process's writer has a backlog now. */
  busy(): boolean {
    return this.#busy()
  }

  /**
   * Whether a round may run now: the writer has no backlog, or the queue's lag has reached a bound.
   * An idle writer costs no read; a busy one two index reads per round.
   */
  async admit(store: Store, now = Date.now()): Promise<boolean> {
    return !this.#busy() || this.overdue(store, now)
  }

  /** How long to pause after a slice that ran `ms`, so that catching up takes the slice share of a core. */
  pauseAfter(ms: number): number {
    return Math.min(MAX_PAUSE_MS, Math.max(0, ms) * this.#pausePerMs)
  }

  /** Whether the queue's lag has reached a bound in rows or in seconds (two index reads). */
  async overdue(store: Store, now = Date.now()): Promise<boolean> {
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
