// Open-loop load at a fixed rate (bench/proxy.ts, CORRAL_BENCH_MODE=rate): requests are started on a
// schedule (rate per second, over a pool of `connections` keep-alive connections) whatever the
// answers do, and each latency is measured from the request's *scheduled* start, so a stall of the
// proxy shows up in the tail instead of slowing the generator down (no coordinated omission).
import { spawn } from 'node:child_process'
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import type { Dispatcher } from 'undici'

export interface RateResult {
  rate: number
  seconds: number
  sent: number
  ok: number
  errors: number
  achieved_rps: number
  p50_ms: number
  p99_ms: number
  p999_ms: number
  max_ms: number
  /** the proxy's own CPU (user + system, every thread of its process and its child processes) per request in the window, when its pid is known */
  cpu_ms_per_req?: number
  /** CPU of the proxy's main threads (event loops) per request: summed over its processes */
  main_cpu_ms_per_req?: number
  /**
   * Share of the window the busiest main thread was on the CPU (its event loop's utilisation, as
   * near as /proc tells: time blocked in a synchronous syscall off the CPU is not counted).
   */
  main_busy_max?: number
  /** how many processes the proxy ran (its own and its children: `corral proxy --workers N` is N + 1) */
  processes?: number
  /** CPU per request of each of those processes, every thread (the tree's order: the primary first, then its workers) */
  processes_ms_per_req?: number[]
  /**
   * CPU per request of each kind of thread, summed over the proxy's processes, by the thread's name
   * (/proc/<pid>/task/<tid>/comm: the event loop under the process's own name, `libuv-worker`, V8's
   * `V8 DefaultWorke…` GC and compiler helpers, a Worker thread under the name it was given).
   */
  threads_ms_per_req?: Record<string, number>
  /** resident memory of the proxy's process tree at the end of the window (MB) */
  rss_mb?: number
  /** this load generator's CPU per request (a saturated generator would inflate every latency) */
  generator_cpu_ms_per_req: number
}

const round = (n: number, d = 2): number => Math.round(n * 10 ** d) / 10 ** d

function pct(sorted: Float64Array, p: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : NaN
}

/** utime + stime in ms of a /proc stat line (fields 14 and 15, clock ticks of 10 ms). */
function statCpuMs(path: string): number {
  const stat = readFileSync(path, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) * 10
}

/** utime + stime of a process in ms, all its threads (/proc/<pid>/stat). */
export function procCpuMs(pid: number): number {
  return statCpuMs(`/proc/${pid}/stat`)
}

/** VmRSS of a process in KB (0 when it is gone). */
function rssKb(pid: number): number {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0)
  } catch {
    return 0
  }
}

function procCpuOr0(pid: number): number {
  try {
    return procCpuMs(pid)
  } catch {
    return 0
  }
}

/** A process and its descendants (corral proxy --workers: the primary and its workers). */
export function processTree(pid: number): number[] {
  const out: number[] = []
  const walk = (p: number, depth: number): void => {
    out.push(p)
    if (depth > 3) return
    let children = ''
    try {
      children = readFileSync(`/proc/${p}/task/${p}/children`, 'utf8')
    } catch {
      return
    }
    for (const c of children.trim().split(/\s+/).filter(Boolean)) walk(Number(c), depth + 1)
  }
  walk(pid, 0)
  return out
}

/**
 * CPU of a process tree in ms: `total` (every thread of every process) and `main` per process
 * (its main thread only, /proc/<pid>/task/<pid>/stat: the event loop of a Node process, with the
 * GC and the synchronous work it does; not the libuv threadpool, the SQLite worker or V8's helpers).
 */
export function treeCpu(pids: readonly number[]): { total: number; main: Map<number, number> } {
  let total = 0
  const main = new Map<number, number>()
  for (const p of pids) {
    try {
      total += procCpuMs(p)
      main.set(p, statCpuMs(`/proc/${p}/task/${p}/stat`))
    } catch {
      // gone meanwhile
    }
  }
  return { total, main }
}

/** CPU in ms of every thread of these processes, summed by thread name (`main` for each process's event loop). */
export function threadCpu(pids: readonly number[]): Map<string, number> {
  const out = new Map<string, number>()
  for (const p of pids) {
    let tids: string[] = []
    try {
      tids = readdirSync(`/proc/${p}/task`)
    } catch {
      continue
    }
    for (const tid of tids) {
      try {
        const name = Number(tid) === p ? 'main' : readFileSync(`/proc/${p}/task/${tid}/comm`, 'utf8').trim()
        out.set(name, (out.get(name) ?? 0) + statCpuMs(`/proc/${p}/task/${tid}/stat`))
      } catch {
        // gone meanwhile
      }
    }
  }
  return out
}

/**
 * `perf record` of every thread of these processes (call graphs; JIT frames are named when the
 * process runs with --perf-basic-prof) until stop(): the whole process's CPU, native work included.
 * CORRAL_BENCH_PERF_HZ sets the sampling frequency (default 499 per second per thread).
 */
export async function perfRecord(pids: readonly number[], out: string): Promise<{ stop(): Promise<void> }> {
  const child = spawn('perf', ['record', '-q', '-F', process.env.CORRAL_BENCH_PERF_HZ ?? '499', '-g', '-p', pids.join(','), '-o', out], { stdio: 'ignore' })
  await new Promise((r) => setTimeout(r, 300))
  return {
    stop: () => new Promise<void>((resolve) => {
      child.once('exit', () => resolve())
      child.kill('SIGINT')
    }),
  }
}

async function schedule(d: Dispatcher, send: (d: Dispatcher) => Promise<void>, rate: number, seconds: number, record: boolean): Promise<{ lat: Float64Array; at: Float64Array; ok: number; errors: number; elapsed: number }> {
  const n = Math.round(rate * seconds)
  const lat = new Float64Array(n)
  // Each answered request's scheduled start, on the monotonic clock the tail attribution shares with the proxies (ms).
  const at0 = new Float64Array(n)
  let ok = 0
  let errors = 0
  let inFlight = 0
  let settled: () => void = () => {}
  const allDone = new Promise<void>((r) => (settled = r))
  let issued = 0
  const start = performance.now() + 20
  const fire = (i: number): void => {
    const at = start + (i * 1000) / rate
    inFlight++
    send(d).then(
      () => {
        if (record) {
          lat[ok] = performance.now() - at
          at0[ok] = at
        }
        ok++
      },
      () => void errors++,
    ).finally(() => {
      if (--inFlight === 0 && issued === n) settled()
    })
  }
  while (issued < n) {
    const due = Math.min(n, Math.floor(((performance.now() - start) * rate) / 1000) + 1)
    while (issued < due) fire(issued++)
    // ~1 ms ticks: a few requests per tick at 3,000/s, without spinning a core the proxy needs.
    await new Promise((r) => setTimeout(r, 1))
  }
  if (inFlight > 0) await allDone
  return { lat: lat.subarray(0, ok), at: at0.subarray(0, ok), ok, errors, elapsed: (performance.now() - start) / 1000 }
}

/** A warm-up at the same rate (discarded; `warmSeconds`, default 1), then `seconds` measured. */
export async function fixedRate(d: Dispatcher, send: (d: Dispatcher) => Promise<void>, o: { rate: number; seconds: number; warmSeconds?: number; pid?: number; perfData?: string; tailFile?: string }): Promise<RateResult> {
  await schedule(d, send, o.rate, o.warmSeconds ?? 1, false)
  const pids = o.pid ? processTree(o.pid) : []
  const perf = o.perfData && pids.length ? await perfRecord(pids, o.perfData) : undefined
  const cpu0 = treeCpu(pids)
  const each0 = pids.map((p) => procCpuOr0(p))
  const threads0 = threadCpu(pids)
  const gen0 = process.cpuUsage()
  const r = await schedule(d, send, o.rate, o.seconds, true)
  const gen = process.cpuUsage(gen0)
  const cpu1 = treeCpu(pids)
  const each1 = pids.map((p) => procCpuOr0(p))
  const threads1 = threadCpu(pids)
  await perf?.stop()
  // CORRAL_BENCH_TAIL_DIR: every request's start (monotonic ms) and latency, with the proxy's pids, for bench/tail-attribution.ts.
  if (o.tailFile) {
    const origin = Number(process.hrtime.bigint()) / 1e6 - performance.now()
    writeFileSync(o.tailFile, JSON.stringify({ pids, client: process.pid, at: Array.from(r.at, (t) => round(t + origin, 3)), lat: Array.from(r.lat, (x) => round(x, 3)) }))
  }
  const n = Math.max(1, r.ok + r.errors)
  let mainMs = 0
  let busiest = 0
  for (const [p, ms] of cpu1.main) {
    const d0 = ms - (cpu0.main.get(p) ?? ms)
    mainMs += d0
    busiest = Math.max(busiest, d0)
  }
  const proc = o.pid
    ? {
        cpu_ms_per_req: round((cpu1.total - cpu0.total) / n, 3), main_cpu_ms_per_req: round(mainMs / n, 3), main_busy_max: round(busiest / (r.elapsed * 1000), 2), processes: pids.length,
        processes_ms_per_req: pids.map((_, i) => round((each1[i]! - each0[i]!) / n, 3)),
        rss_mb: round(pids.reduce((a, p) => a + rssKb(p), 0) / 1024, 1),
        threads_ms_per_req: Object.fromEntries([...threads1].map(([k, v]) => [k, round((v - (threads0.get(k) ?? 0)) / n, 4)]).filter(([, v]) => (v as number) > 0)),
      }
    : {}
  const sorted = Float64Array.from(r.lat).sort()
  return {
    rate: o.rate,
    seconds: o.seconds,
    sent: r.ok + r.errors,
    ok: r.ok,
    errors: r.errors,
    achieved_rps: round(r.ok / r.elapsed, 1),
    p50_ms: round(pct(sorted, 50)),
    p99_ms: round(pct(sorted, 99)),
    p999_ms: round(pct(sorted, 99.9)),
    max_ms: round(sorted[sorted.length - 1] ?? NaN),
    ...proc,
    generator_cpu_ms_per_req: round((gen.user + gen.system) / 1000 / Math.max(1, r.ok + r.errors), 3),
  }
}
