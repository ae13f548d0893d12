// An idle process gives its young generation back. Start-up and load grow V8's semi-spaces to
// their maximum (2 × 16 MB, touched, so resident); V8 shrinks them only at a GC that sees a low
// allocation rate, and an idle process allocates too little to reach its next GC for minutes.
// So while the event loop is idle and the young generation is large, a scavenge is run: the first
// one after load still sees the load's allocation rate, the next one (an interval later) shrinks
// it. A scavenge of an idle heap takes a few milliseconds, and none runs once it is small.
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'

/** Event-loop utilization over an interval below which the process counts as idle. */
const IDLE_UTILIZATION = 0.02
/** A young generation at or below this size is left alone (V8's own floor is 1-2 MB). */
const SMALL_YOUNG_BYTES = 4 * 1024 * 1024

type Gc = (options: { type: 'minor' | 'major' }) => void

/** Starts the check every `intervalMs` (unreferenced: it never keeps a process alive); returns its stop. */
export function trimHeapWhenIdle(intervalMs = 10_000): () => Promise<void> {
  let gc: Gc | undefined
  let last = performance.eventLoopUtilization()
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization()
    const busy = performance.eventLoopUtilization(now, last).utilization
    last = now
    if (busy > IDLE_UTILIZATION || youngBytes() <= SMALL_YOUNG_BYTES) return
    ;(gc ??= exposedGc())({ type: 'minor' })
  }, intervalMs)
  timer.unref()
  return async () => clearInterval(timer)
}

function youngBytes(): number {
  return getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_size ?? 0
}

/** V8's `gc`, taken from a context made while --expose-gc is set, then unset again (later contexts and workers get none). */
function exposedGc(): Gc {
  setFlagsFromString('--expose-gc')
  try {
    return runInNewContext('gc') as Gc
  } finally {
    setFlagsFromString('--no-expose-gc')
  }
}
