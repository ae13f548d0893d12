// A background worker thread is its own V8 isolate, and V8 gives each one the main thread's
// young-generation maximum (semi-spaces of up to 16 MB each, 32 MB of new space, all of it touched
// once a steady load has grown it). The audit path's threads (the SQLite bulk insert, the log
// appender) allocate steadily under load and keep little, so a small young generation costs them
// a few more scavenges and takes tens of MB off serve's resident memory (docs/reliability.md
// "Memory footprint").
import type { ResourceLimits } from 'node:worker_threads'

/** Resource limits for a background worker thread: semi-spaces of `semiSpaceMb` (`CORRAL_WORKER_SEMI_SPACE_MB`, default 2). */
export function workerLimits(semiSpaceMb = semiSpaceFromEnv()): ResourceLimits {
  // V8 sizes a young generation as two semi-spaces plus a new large-object space of one more.
  return { maxYoungGenerationSizeMb: semiSpaceMb * 3 }
}

function semiSpaceFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const n = Number(env.CORRAL_WORKER_SEMI_SPACE_MB ?? 2)
  return Number.isInteger(n) && n >= 1 && n <= 64 ? n : 2
}
