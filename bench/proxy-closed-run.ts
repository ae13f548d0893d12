// bench:proxy's closed-loop-only mode (CORRAL_BENCH_MODE=closed): each target in turn (direct
// first), POSTs only, CORRAL_BENCH_CONNECTIONS senders (default 32) each sending its next request as
// soon as its last is answered, for CORRAL_BENCH_SECONDS (default 10). Each target is first warmed
// for CORRAL_BENCH_WARM_SECONDS and at least CORRAL_BENCH_WARM_REQUESTS requests (default 30,000;
// at most 120 s), then 2 s before each later round: a fresh Node proxy's CPU per request keeps
// falling while V8 optimises, and on a loaded machine a warm-up by time alone answers too few
// requests for TurboFan to finish, so its compiling lands in the window (corral's larger program
// more than the floor's). CORRAL_BENCH_CLOSED_ROUNDS repeats it, the proxies'
// order reversed every other round (direct stays first), so an A/B of two builds alternates which
// runs first. Reports each target's req/s, its whole-tree CPU per request (every thread of every
// process, /proc), the same by thread name (`main`: the event loop), the load average before and
// after each round, and every proxy's CPU per request over corral's per round; CORRAL_BENCH_PERF=1
// adds a `perf record` of every thread of each target over its window (bench/perf-summary.ts reads
// it; the request count to pass is in the JSON as `requests`) → bench/results/proxy-closed.json
// (or CORRAL_BENCH_OUT).
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus } from 'node:os'
import { basename, join, resolve } from 'node:path'
import type { Dispatcher } from 'undici'
import { pct, round } from './proxy-load.js'
import { perfRecord, processTree, threadCpu, treeCpu } from './proxy-rate.js'
import { legTrace, syscallCount, type LegCounts } from './proxy-syscalls.js'

const SECONDS = Number(process.env.CORRAL_BENCH_SECONDS ?? 10)
const WARM_SECONDS = Number(process.env.CORRAL_BENCH_WARM_SECONDS ?? 10)
const WARM_REQUESTS = Number(process.env.CORRAL_BENCH_WARM_REQUESTS ?? 30_000)
const WARM_MAX_SECONDS = 120
const CONNECTIONS = Number(process.env.CORRAL_BENCH_CONNECTIONS ?? 32)
const ROUNDS = Math.max(1, Number(process.env.CORRAL_BENCH_CLOSED_ROUNDS ?? 4))
const SYSCALLS = process.env.CORRAL_BENCH_SYSCALLS === '1'
const CHURN_DIR = process.env.CORRAL_BENCH_CHURN_DIR
const loadavg = (): number[] => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number)

type Target = { name: string; pid?: number; dispatcher: (n?: number) => Dispatcher }

export interface ClosedResult {
  requests: number
  errors: number
  rps: number
  p50_ms: number
  p99_ms: number
  /** CPU of the target's process tree (every thread) per answered request */
  cpu_ms_per_req?: number
  /** CPU per request by thread name, summed over the tree's processes (`main`: each event loop) */
  threads_ms_per_req?: Record<string, number>
  /** this load generator's CPU per request */
  generator_cpu_ms_per_req: number
  /** CORRAL_BENCH_SYSCALLS=1: syscalls per request over the window, the event loop (`main`) and every other thread */
  syscalls_per_req?: { main: Record<string, number>; other: Record<string, number> }
  /** CORRAL_BENCH_SYSCALLS=1: the event loop's reads and writes per request on each leg, over a further 3 s window */
  legs?: LegCounts & { requests: number; rps: number }
  /** CORRAL_BENCH_CHURN_DIR=<dir>: async resources, socket timer calls and listeners per request on the event loop (bench/churn-probe.mjs) */
  churn_per_req?: Record<string, number>
}

/** bench/churn-probe.mjs's running totals of a process (SIGUSR2), or undefined where no probe answers. */
async function churn(pid: number): Promise<Record<string, number> | undefined> {
  if (!CHURN_DIR) return undefined
  const file = join(CHURN_DIR, `churn-${pid}.json`)
  try {
    rmSync(file, { force: true })
    process.kill(pid, 'SIGUSR2')
  } catch {
    return undefined
  }
  for (let i = 0; i < 40; i++) {
    await new Promise((r) => setTimeout(r, 50))
    try {
      return JSON.parse(readFileSync(file, 'utf8')) as Record<string, number>
    } catch {
      // not written yet
    }
  }
  return undefined
}

async function loop(d: Dispatcher, send: (d: Dispatcher) => Promise<void>, seconds: number, lat?: number[]): Promise<{ ok: number; errors: number; elapsed: number }> {
  let ok = 0
  let errors = 0
  const start = performance.now()
  const end = start + seconds * 1000
  await Promise.all(Array.from({ length: CONNECTIONS }, async () => {
    while (performance.now() < end) {
      const t0 = performance.now()
      await send(d).then(() => (ok++, lat?.push(performance.now() - t0)), () => void errors++)
    }
  }))
  return { ok, errors, elapsed: (performance.now() - start) / 1000 }
}

async function measure(t: Target, send: (d: Dispatcher) => Promise<void>, warm: { seconds: number; requests: number }, perfData?: string, upPort?: number): Promise<ClosedResult> {
  const d = t.dispatcher(CONNECTIONS)
  try {
    const w0 = performance.now()
    let warmed = (await loop(d, send, warm.seconds)).ok
    while (warmed < warm.requests && performance.now() - w0 < WARM_MAX_SECONDS * 1000) warmed += (await loop(d, send, 2)).ok
    const pids = t.pid ? processTree(t.pid) : []
    const perf = perfData && pids.length ? await perfRecord(pids, perfData) : undefined
    const cpu0 = treeCpu(pids).total
    const threads0 = threadCpu(pids)
    const churn0 = t.pid ? await churn(t.pid) : undefined
    const sys = SYSCALLS && pids.length ? syscallCount(pids) : undefined
    const gen0 = process.cpuUsage()
    const lat: number[] = []
    const r = await loop(d, send, SECONDS, lat)
    const gen = process.cpuUsage(gen0)
    const cpu1 = treeCpu(pids).total
    const threads1 = threadCpu(pids)
    await perf?.stop()
    const syscalls = await sys?.stop(r.ok)
    const churn1 = churn0 && t.pid ? await churn(t.pid) : undefined
    const churned = churn0 && churn1
      ? Object.fromEntries(Object.entries(churn1).map(([k, v]) => [k, round((v - (churn0[k] ?? 0)) / Math.max(1, r.ok), 3)] as const).filter(([, v]) => v >= 0.01).sort((a, b) => b[1] - a[1]))
      : undefined
    let legs: ClosedResult['legs']
    if (SYSCALLS && t.pid && upPort) {
      const trace = legTrace(t.pid, upPort)
      await new Promise((res) => setTimeout(res, 300))
      const w = await loop(d, send, 3)
      legs = { ...(await trace.stop(w.ok)), requests: w.ok, rps: round(w.ok / w.elapsed, 1) }
    }
    const n = Math.max(1, r.ok)
    const proc = pids.length
      ? {
          cpu_ms_per_req: round((cpu1 - cpu0) / n, 4),
          threads_ms_per_req: Object.fromEntries([...threads1].map(([k, v]) => [k, round((v - (threads0.get(k) ?? 0)) / n, 4)]).filter(([, v]) => (v as number) > 0)),
        }
      : {}
    return {
      requests: r.ok, errors: r.errors, rps: round(r.ok / r.elapsed, 1), p50_ms: round(pct(lat, 50)), p99_ms: round(pct(lat, 99)),
      ...proc, generator_cpu_ms_per_req: round((gen.user + gen.system) / 1000 / n, 4),
      ...(syscalls ? { syscalls_per_req: syscalls } : {}), ...(legs ? { legs } : {}), ...(churned ? { churn_per_req: churned } : {}),
    }
  } finally {
    await d.close()
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length ? (s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2) : NaN
}

export async function closedRun(targets: Target[], post: (d: Dispatcher) => Promise<void>, resultsDir: string, upPort?: number): Promise<void> {
  const load0 = loadavg()
  const rounds: { round: number; order: string[]; loadavg_before: number[]; loadavg_after: number[]; results: Record<string, ClosedResult> }[] = []
  const warmed = new Set<string>()
  const [direct, ...proxies] = targets
  if (process.env.CORRAL_BENCH_PERF) mkdirSync(join(resultsDir, 'prof'), { recursive: true })
  // perf files named after the JSON's name too, so a second run does not replace the first's.
  const tag = process.env.CORRAL_BENCH_OUT ? `${basename(process.env.CORRAL_BENCH_OUT, '.json')}-` : ''
  for (let r = 1; r <= ROUNDS; r++) {
    const order = [direct!, ...(r % 2 === 0 ? [...proxies].reverse() : proxies)]
    const before = loadavg()
    const results: Record<string, ClosedResult> = {}
    for (const t of order) {
      process.stderr.write(`closed loop c=${CONNECTIONS} × ${SECONDS} s, round ${r}: ${t.name} …\n`)
      const warm = warmed.has(t.name) ? { seconds: 2, requests: 0 } : { seconds: Math.max(1, WARM_SECONDS), requests: WARM_REQUESTS }
      warmed.add(t.name)
      const perfData = process.env.CORRAL_BENCH_PERF && t.pid ? join(resultsDir, 'prof', `perf-closed-${tag}${t.name}-${r}.data`) : undefined
      results[t.name] = await measure(t, post, warm, perfData, upPort)
    }
    const rec = { round: r, order: order.map((t) => t.name), loadavg_before: before, loadavg_after: loadavg(), results }
    rounds.push(rec)
    process.stdout.write(`\nround ${r}, load average ${rec.loadavg_before.join(' ')} → ${rec.loadavg_after.join(' ')}\n`)
    for (const t of order) {
      const x = results[t.name]!
      process.stdout.write(`${t.name.padEnd(12)} ${String(x.rps).padStart(7)} req/s  p50 ${x.p50_ms} ms  errors ${x.errors}${x.cpu_ms_per_req !== undefined ? `  cpu ${x.cpu_ms_per_req} ms/req (${Object.entries(x.threads_ms_per_req ?? {}).map(([k, v]) => `${k} ${v}`).join(', ')})` : ''}  generator ${x.generator_cpu_ms_per_req}\n`)
    }
  }
  const summary: Record<string, unknown> = {}
  for (const t of proxies) {
    const cpu = rounds.map((x) => x.results[t.name]?.cpu_ms_per_req).filter((v): v is number => typeof v === 'number')
    const main = rounds.map((x) => x.results[t.name]?.threads_ms_per_req?.main).filter((v): v is number => typeof v === 'number')
    summary[t.name] = { cpu_ms_per_req: cpu, median: round(median(cpu), 4), main_median: round(median(main), 4), rps: rounds.map((x) => x.results[t.name]?.rps) }
    if (t.name === 'corral') continue
    const ratio = rounds.map((x) => (x.results.corral?.cpu_ms_per_req ?? NaN) / (x.results[t.name]?.cpu_ms_per_req ?? NaN)).filter(Number.isFinite).map((v) => round(v, 3))
    summary[`corral/${t.name}`] = { per_round: ratio, median: round(median(ratio), 3) }
  }
  const out = {
    machine: { cpus: cpus().length, node: process.version, loadavg_before: load0, loadavg_after: loadavg() },
    mode: 'closed', seconds: SECONDS, warm_seconds: WARM_SECONDS, warm_requests: WARM_REQUESTS, connections: CONNECTIONS, rounds_count: ROUNDS,
    request: 'POST /v1/messages (body CEL match, 2 header transforms, injected credential, request counter with a ceiling)',
    rounds, summary,
  }
  const file = resolve(process.env.CORRAL_BENCH_OUT ?? join(resultsDir, 'proxy-closed.json'))
  writeFileSync(file, JSON.stringify(out, null, 2) + '\n')
  process.stdout.write(`\n${JSON.stringify(summary, null, 1)}\nload average ${out.machine.loadavg_before.join(' ')} → ${out.machine.loadavg_after.join(' ')}\nwrote ${file}\n`)
}
