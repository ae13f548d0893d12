// Process facts from the operating system (src/proc): whether a pid recorded in a lock or a
// journal is still the process that wrote it; and the process's own upkeep (an idle process gives
// its young generation back; a background thread's young generation is kept small), and where a
// file of this build is (a worker's entry, the console's files) in the sources, dist/ or the bundle.
// A leaf: imports no other part of src/.
export { ownStartTicks, procStat, processGone } from './liveness.js'
export { trimHeapWhenIdle } from './idle-heap.js'
export { workerLimits } from './worker-limits.js'
export { builtFile } from './build-files.js'
