// Loaded with `--import` into every process of a bench:proxy tail attribution run
// (CORRAL_BENCH_TAIL_DIR, bench/tail-attribution.ts): what the process's main thread did, on the
// monotonic clock every process shares (process.hrtime, in ms), so the bench client's slowest
// requests can be laid over it. Records each GC pause (perf_hooks 'gc': scavenge, mark-compact,
// incremental marking, weak callbacks; the young generation's size and the old's use after it) and each stall of the event loop (a 2 ms interval that fired
// more than 1 ms late: the loop was busy or the thread was off the CPU). Plain JavaScript, so it
// loads into the built corral as into the tsx-run peers. Appends JSON lines every second and at exit.
import { appendFileSync } from 'node:fs'
import { PerformanceObserver, performance } from 'node:perf_hooks'
import { getHeapSpaceStatistics } from 'node:v8'

const dir = process.env.CORRAL_BENCH_TAIL_DIR
if (dir) {
  const file = `${dir}/probe-${process.pid}.jsonl`
  // The monotonic clock (ms) at performance's origin: performance.now() + origin = hrtime in ms.
  const origin = Number(process.hrtime.bigint()) / 1e6 - performance.now()
  let events = []
  const flush = () => {
    if (!events.length) return
    try {
      appendFileSync(file, events.map((e) => JSON.stringify(e)).join('\n') + '\n')
    } catch {
      // the directory went away: the bench is over
    }
    events = []
  }
  const KINDS = { 1: 'scavenge', 2: 'mark-compact', 4: 'incremental', 8: 'weak-callbacks' }
  new PerformanceObserver((list) => {
    // The young generation's size and the old generation's use just after (what a scavenge promoted shows as the old's growth).
    const spaces = Object.fromEntries(getHeapSpaceStatistics().map((s) => [s.space_name, s]))
    const heap = { young: spaces.new_space?.space_size, old: spaces.old_space?.space_used_size }
    for (const e of list.getEntries()) events.push({ k: 'gc', t: origin + e.startTime, d: e.duration, kind: KINDS[e.detail?.kind] ?? String(e.detail?.kind), ...heap })
  }).observe({ entryTypes: ['gc'] })
  const EVERY = 2
  let last = performance.now()
  const cpu0 = { v: process.cpuUsage() }
  setInterval(() => {
    const now = performance.now()
    const lag = now - last - EVERY
    if (lag > 1) {
      // The process's CPU over the stretch (every thread): near the stretch's length when the loop was busy, near 0 when it was descheduled.
      const c = process.cpuUsage(cpu0.v)
      events.push({ k: 'stall', t: origin + last, d: now - last, cpu: (c.user + c.system) / 1000 })
    }
    cpu0.v = process.cpuUsage()
    last = now
  }, EVERY).unref()
  setInterval(flush, 1000).unref()
  process.on('exit', flush)
  // SIGUSR2 starts V8's sampling heap profiler counting what the young generation collects too
  // (allocation churn, not only what stays); the next SIGUSR2 writes heap-<pid>-<n>.heapprofile.
  let session
  let n = 0
  process.on('SIGUSR2', async () => {
    const { Session } = await import('node:inspector')
    if (!session) {
      session = new Session()
      session.connect()
      session.post('HeapProfiler.startSampling', { samplingInterval: 1024, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true })
      return
    }
    const s = session
    session = undefined
    s.post('HeapProfiler.stopSampling', (err, r) => {
      if (!err) appendFileSync(`${dir}/heap-${process.pid}-${++n}.heapprofile`, JSON.stringify(r.profile))
      s.disconnect()
    })
  })
}
