// bench:proxy's rate-only mode (CORRAL_BENCH_MODE=rate): each target in turn (direct first), POSTs
// only, open loop at each rate of CORRAL_BENCH_RATE (a comma list) over CORRAL_BENCH_CONNECTIONS
// connections for CORRAL_BENCH_RATE_SECONDS (bench/proxy-rate.ts). Each target is first warmed for
// CORRAL_BENCH_RATE_WARM_SECONDS at the first rate (unmeasured: a fresh Node proxy's CPU per request
// keeps falling while V8 optimises, and N workers each see 1/N of the warm-up). CORRAL_BENCH_RATE_ROUNDS
// repeats every rate, the proxies' order reversed every other round (direct stays first), so an A/B
// of two builds or of two process layouts alternates which runs first. Reports each target's
// percentiles, every proxy's ADDED latency over direct in the same round, its whole-tree CPU per
// request (each process apart too: the primary and its workers), the load average before and after
// each round, and, when corral-wN runs, its CPU per request over corral's per round
// → bench/results/proxy-rate.json (or CORRAL_BENCH_OUT). CORRAL_BENCH_RATE_BACKLOG_SECONDS=S runs a
// POST closed loop for S s against each proxy right before its window, as the full bench's closed
// phases do before its rate phase: the provable log's queue then holds S seconds of a saturated
// proxy's rows when the window starts, and its appender catches up during the window; with
// CORRAL_BENCH_RATE_BACKLOG_HOLD=1 the target's appender process is stopped (SIGSTOP) through that
// loop and continued as the window's warm-up starts, so the whole loop's rows are caught up in the
// window (what pacing leaves after a writer's burst). Each window's
// start and end are in `rounds[].windows` (bench/appender-trace.ts lays an appender's trace over them).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { cpus } from 'node:os'
import { join, resolve } from 'node:path'
import type { Dispatcher } from 'undici'
import { closedLoop, round } from './proxy-load.js'
import { fixedRate, type RateResult } from './proxy-rate.js'

const RATES = (process.env.CORRAL_BENCH_RATE ?? '3000').split(',').map(Number).filter((n) => n > 0)
const RATE_SECONDS = Number(process.env.CORRAL_BENCH_RATE_SECONDS ?? 20)
const CONNECTIONS = Number(process.env.CORRAL_BENCH_CONNECTIONS ?? 32)
const ROUNDS = Math.max(1, Number(process.env.CORRAL_BENCH_RATE_ROUNDS ?? 1))
const WARM_SECONDS = Number(process.env.CORRAL_BENCH_RATE_WARM_SECONDS ?? 10)
const BACKLOG_SECONDS = Number(process.env.CORRAL_BENCH_RATE_BACKLOG_SECONDS ?? 0)
const HOLD = process.env.CORRAL_BENCH_RATE_BACKLOG_HOLD === '1'
const loadavg = (): number[] => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number)

type Target = { name: string; pid?: number; appenderPid?: number; dispatcher: (n?: number) => Dispatcher }

interface Round {
  round: number
  rate: number
  order: string[]
  loadavg_before: number[]
  loadavg_after: number[]
  results: Record<string, RateResult>
  added_over_direct: Record<string, { p50_ms: number; p99_ms: number; p999_ms: number }>
  /** Each target's measured window and the closed loop before it (ms since the epoch). */
  windows: Array<{ target: string; phase: string; from: number; to: number }>
}

async function measure(t: Target, rate: number, tag: string, resultsDir: string, warmSeconds: number): Promise<RateResult> {
  process.stderr.write(`fixed rate ${rate}/s × ${RATE_SECONDS} s over ${CONNECTIONS} connections: ${t.name} (${tag}) …\n`)
  const d = t.dispatcher(CONNECTIONS)
  // CORRAL_BENCH_PERF=1: `perf record` of each target with a pid over its window → bench/results/prof/perf-<name>[-<rate>-<round>].data
  const perfData = process.env.CORRAL_BENCH_PERF && t.pid ? join(resultsDir, 'prof', `perf-${t.name}${tag ? `-${tag}` : ''}.data`) : undefined
  if (perfData) mkdirSync(join(resultsDir, 'prof'), { recursive: true })
  try {
    const tailFile = process.env.CORRAL_BENCH_TAIL_DIR ? join(process.env.CORRAL_BENCH_TAIL_DIR, `client-${t.name}-${rate}-${tag || '1'}.json`) : undefined
    return await fixedRate(d, (x) => send(x), { rate, seconds: RATE_SECONDS, warmSeconds, ...(t.pid ? { pid: t.pid } : {}), ...(perfData ? { perfData } : {}), ...(tailFile ? { tailFile } : {}) })
  } finally {
    await d.close()
  }
}

let send: (d: Dispatcher) => Promise<void> = async () => {}

function line(name: string, r: RateResult, a?: { p99_ms: number }): string {
  const cpu = r.cpu_ms_per_req !== undefined
    ? `  cpu ${r.cpu_ms_per_req} ms/req (main threads ${r.main_cpu_ms_per_req}, busiest loop ${Math.round((r.main_busy_max ?? 0) * 100)} %, ${r.processes} process${r.processes === 1 ? '' : 'es'}${r.processes_ms_per_req && r.processes_ms_per_req.length > 1 ? `: ${r.processes_ms_per_req.join(' + ')}` : ''})`
    : ''
  return `${name.padEnd(11)} ${String(r.achieved_rps).padStart(7)} req/s  p50 ${String(r.p50_ms).padStart(6)}  p99 ${String(r.p99_ms).padStart(7)}  p99.9 ${String(r.p999_ms).padStart(7)}  max ${String(r.max_ms).padStart(7)} ms  errors ${r.errors}${a ? `  added p99 ${a.p99_ms} ms` : ''}${cpu}${r.rss_mb !== undefined ? `  rss ${r.rss_mb} MB` : ''}  generator ${r.generator_cpu_ms_per_req} ms/req\n`
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length ? (s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2) : NaN
}

export async function rateRun(targets: Target[], post: (d: Dispatcher) => Promise<void>, resultsDir: string): Promise<void> {
  send = post
  const load0 = loadavg()
  const rounds: Round[] = []
  const warmed = new Set<string>()
  const [direct, ...proxies] = targets
  for (let r = 1; r <= ROUNDS; r++) {
    for (const rate of RATES) {
      const order = [direct!, ...(r % 2 === 0 ? [...proxies].reverse() : proxies)]
      const before = loadavg()
      const results: Record<string, RateResult> = {}
      const windows: Round['windows'] = []
      for (const t of order) {
        const warm = warmed.has(t.name) ? 1 : Math.max(1, WARM_SECONDS)
        warmed.add(t.name)
        if (BACKLOG_SECONDS > 0 && t !== direct) {
          process.stderr.write(`closed loop ${BACKLOG_SECONDS} s before the window: ${t.name} …\n`)
          const d = t.dispatcher()
          const from = Date.now()
          if (HOLD && t.appenderPid) process.kill(t.appenderPid, 'SIGSTOP')
          try {
            await closedLoop(() => send(d), { seconds: BACKLOG_SECONDS })
          } finally {
            if (HOLD && t.appenderPid) process.kill(t.appenderPid, 'SIGCONT')
          }
          windows.push({ target: t.name, phase: 'backlog', from, to: Date.now() })
          await d.close()
        }
        const from = Date.now()
        results[t.name] = await measure(t, rate, ROUNDS > 1 || RATES.length > 1 ? `${rate}-${r}` : '', resultsDir, warm)
        windows.push({ target: t.name, phase: String(rate), from, to: Date.now() })
      }
      const d = results.direct!
      const added = Object.fromEntries(Object.entries(results).filter(([n]) => n !== 'direct').map(([n, x]) => [n, {
        p50_ms: round(x.p50_ms - d.p50_ms), p99_ms: round(x.p99_ms - d.p99_ms), p999_ms: round(x.p999_ms - d.p999_ms),
      }]))
      const rec: Round = { round: r, rate, order: order.map((t) => t.name), loadavg_before: before, loadavg_after: loadavg(), results, added_over_direct: added, windows }
      rounds.push(rec)
      process.stdout.write(`\nround ${r}, ${rate} req/s, load average ${rec.loadavg_before.join(' ')} → ${rec.loadavg_after.join(' ')}\n`)
      for (const t of order) process.stdout.write(line(t.name, results[t.name]!, added[t.name]))
      for (const t of order) {
        const x = results[t.name]!
        if (x.threads_ms_per_req) process.stdout.write(`  ${t.name} threads ms/req: ${Object.entries(x.threads_ms_per_req).map(([k, v]) => `${k} ${v}`).join(', ')}\n`)
      }
    }
  }
  // Per rate: each proxy's CPU per request over the rounds, and corral-wN's over corral's round by round.
  const summary: Record<string, Record<string, unknown>> = {}
  for (const rate of RATES) {
    const of = rounds.filter((x) => x.rate === rate)
    const s: Record<string, unknown> = {}
    for (const t of proxies) {
      const cpu = of.map((x) => x.results[t.name]?.cpu_ms_per_req).filter((v): v is number => typeof v === 'number')
      s[t.name] = { cpu_ms_per_req: cpu, median: round(median(cpu), 3), achieved_rps: of.map((x) => x.results[t.name]?.achieved_rps) }
      if (t.name !== 'corral' && cpu.length) {
        const ratio = of.map((x) => (x.results[t.name]?.cpu_ms_per_req ?? NaN) / (x.results.corral?.cpu_ms_per_req ?? NaN)).filter(Number.isFinite).map((v) => round(v, 2))
        s[`${t.name}/corral`] = { per_round: ratio, median: round(median(ratio), 2) }
      }
    }
    summary[String(rate)] = s
  }
  const out = {
    machine: { cpus: cpus().length, node: process.version, loadavg_before: load0, loadavg_after: loadavg() },
    rates: RATES, rounds_count: ROUNDS, seconds: RATE_SECONDS, warm_seconds: WARM_SECONDS, backlog_seconds: BACKLOG_SECONDS, backlog_hold: HOLD, connections: CONNECTIONS,
    request: 'POST /v1/messages (body CEL match, 2 header transforms, injected credential, request counter with a ceiling)',
    rounds, summary,
  }
  const file = resolve(process.env.CORRAL_BENCH_OUT ?? join(resultsDir, 'proxy-rate.json'))
  writeFileSync(file, JSON.stringify(out, null, 2) + '\n')
  process.stdout.write(`\n${JSON.stringify(summary, null, 1)}\nload average ${out.machine.loadavg_before.join(' ')} → ${out.machine.loadavg_after.join(' ')}\nwrote ${file}\n`)
}
