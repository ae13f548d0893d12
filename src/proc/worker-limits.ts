// A background worker thread is its own V8 isolate, and V8 gives each one the main thread's
// young-generation maximum (semi-spaces of up to 16 MB each, 32 MB of new space, all of it touched
// once a steady load has grown it). An operator short of memory can hold the audit path's threads
// (the SQLite bulk insert, the log appender) to smaller semi-spaces; by default they keep V8's,
// because on a quiet machine 2 MB semi-spaces cost the SQLite ingest about a tenth of its rate and
// serve's requests 5-11 % more CPU while its loaded peak did not fall (docs/reliability.md
// "Memory footprint").
import type { ResourceLimits } from 'node:worker_threads'

/** Resource limits for a background worker thread: semi-spaces of `CORRAL_WORKER_SEMI_SPACE_MB` when set, else V8's. */
export function workerLimits(semiSpaceMb = semiSpaceFromEnv()): ResourceLimits {
  // V8 sizes a young generation as two semi-spaces plus a new large-object space of one more.
  return semiSpaceMb === undefined ? {} : { maxYoungGenerationSizeMb: semiSpaceMb * 3 }
}

function semiSpaceFromEnv(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const n = Number(env.CORRAL_WORKER_SEMI_SPACE_MB)
  return Number.isInteger(n) && n >= 1 && n <= 64 ? n : undefined
}
