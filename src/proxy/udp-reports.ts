// How many rows UDP reports may write (transparent.ts): a datagram costs an agent nothing to
// send, so a flood must not become a flood of rows. Per workspace, one row per destination and
// port per KEY_WINDOW_MS, and at most ROWS_PER_SECOND rows (a burst of as many) across all its
// destinations. What is not written is counted, and the count rides on the next row written for
// that workspace (`detail.suppressed`), so every report is accounted for.
import { RowAllowance } from './row-allowance.js'

const KEY_WINDOW_MS = 60_000
const ROWS_PER_SECOND = 5
/** Destinations remembered per workspace; past it the oldest is forgotten (it may get a row again). */
const MAX_KEYS = 256

interface WorkspaceReports {
  allowance: RowAllowance
  lastRowAt: Map<string, number>
  suppressed: number
}

export class UdpReports {
  readonly #byWorkspace = new Map<string, WorkspaceReports>()

  /** Whether this report gets a row: the number of reports only counted before it, or undefined (only counted). */
  take(workspaceId: string, key: string, now = Date.now()): number | undefined {
    let w = this.#byWorkspace.get(workspaceId)
    if (!w) this.#byWorkspace.set(workspaceId, (w = { allowance: new RowAllowance(ROWS_PER_SECOND, () => {}), lastRowAt: new Map(), suppressed: 0 }))
    const last = w.lastRowAt.get(key)
    if (last !== undefined && now - last < KEY_WINDOW_MS) {
      w.suppressed++
      return undefined
    }
    if (w.allowance.take(now) === undefined) {
      w.suppressed++
      return undefined
    }
    w.lastRowAt.delete(key)
    if (w.lastRowAt.size >= MAX_KEYS) w.lastRowAt.delete(w.lastRowAt.keys().next().value!)
    w.lastRowAt.set(key, now)
    const suppressed = w.suppressed
    w.suppressed = 0
    return suppressed
  }

  forget(workspaceId: string): void {
    this.#byWorkspace.delete(workspaceId)
  }
}
