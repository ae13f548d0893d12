// The main thread's young generation is held at a cap. V8 fixes the semi-spaces' maximum when the
// isolate is made, before any of corral's code runs (`--max-semi-space-size` works only on the
// command line), and under load doubles them up to 16 MB each (32 MB of new space, all of it
// touched); it doubles by `--semi-space-growth-factor`, a flag V8 reads at each growth. So after
// every GC the factor is set from the size then: 2 while one more doubling stays within the cap,
// 1 (no growth) from there on. Shrinking is V8's own (and the idle trim's), after which growth is
// allowed again. The flag is process-wide; worker threads bound their young generation through
// their own resource limits (workerLimits).
import { PerformanceObserver } from 'node:perf_hooks'
import { getHeapSpaceStatistics, setFlagsFromString, type HeapSpaceInfo } from 'node:v8'
import type { ResourceLimits } from 'node:worker_threads'

const MB = 1024 * 1024

/** The semi-space cap in MB: `CORRAL_SEMI_SPACE_MB` (0: V8's own growth, up to 16 MB), else `fallback`. */
export function semiSpaceCapMb(env: NodeJS.ProcessEnv = process.env, fallback = 4): number {
  const raw = env.CORRAL_SEMI_SPACE_MB
  const n = raw === undefined || raw.trim() === '' ? fallback : Number(raw)
  return Number.isInteger(n) && n >= 0 && n <= 64 ? n : fallback
}

/** Keeps the young generation's semi-spaces at or under `capMb` (0: no cap); returns its stop. */
export function capYoungGeneration(capMb = semiSpaceCapMb()): () => Promise<void> {
  // bin/run.js holds growth off during a long-running command's start-up; 0 gives V8's default back.
  if (capMb <= 0) {
    setFlagsFromString('--semi-space-growth-factor=2')
    return async () => {}
  }
  let factor = 0
  const apply = (): void => {
    // new_space's size counts both semi-spaces.
    const semi = (newSpace()?.space_size ?? 0) / 2
    const next = semi * 2 <= capMb * MB ? 2 : 1
    if (next === factor) return
    factor = next
    setFlagsFromString(`--semi-space-growth-factor=${next}`)
  }
  apply()
  const observer = new PerformanceObserver(apply)
  observer.observe({ entryTypes: ['gc'] })
  return async () => {
    observer.disconnect()
    setFlagsFromString('--semi-space-growth-factor=2')
  }
}

/** Resource limits for a background worker thread: a young generation of `semiSpaceMb` semi-spaces. */
export function workerLimits(semiSpaceMb = 2): ResourceLimits {
  // V8 splits a young generation into two semi-spaces and a large-object space of one semi-space each.
  return { maxYoungGenerationSizeMb: semiSpaceMb * 3 }
}

function newSpace(): HeapSpaceInfo | undefined {
  return getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')
}
