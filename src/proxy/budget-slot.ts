// One budget scope's local state (budgets.ts): its lease from the ledger, what is owed to it, its
// in-flight requests and max_concurrent permits.
import type { LedgerKey } from '../store/index.js'

export class Slot {
  lease = 0
  /** Ledger `used` at the last database answer (includes our unreturned lease). */
  dbUsed = 0
  windowStart = 0
  /** Debits not yet in the ledger: write-behind for unlimited scopes, owed (blocking) for ceilings. */
  pending = 0
  inFlight = 0
  /** `max_concurrent` permits this process holds in the database, and how many requests use one. */
  permits = 0
  permitUsers = 0
  acquiring: Promise<void> | undefined
  /** Until when the ledger is known to have nothing left for this slot (see EXHAUSTED_RECHECK_MS). */
  exhaustedUntil = 0
  /** Removed from the slots (close): a cached reference must not be used any more. */
  dropped = false
  /** The per-counter caches (Budgets #wsSlot) that hold this slot under its workspace id. */
  readonly cachedIn: Map<string, Slot>[] = []
  constructor(readonly k: LedgerKey, readonly max: number) {}

  /** Best local estimate of what is really spent in this window. */
  used(): number {
    return Math.max(0, this.dbUsed - this.lease + this.pending)
  }
}
