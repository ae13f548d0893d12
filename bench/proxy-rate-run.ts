// bench:proxy's rate-only mode (CORRAL_BENCH_MODE=rate): each target in turn (direct first), POSTs
// only, open loop at CORRAL_BENCH_RATE over CORRAL_BENCH_CONNECTIONS connections for
// CORRAL_BENCH_RATE_SECONDS (bench/proxy-rate.ts). Reports each target's percentiles and every
// proxy's ADDED latency over direct in the same run, with the load the machine was under (load
// average before and after, each proxy's own CPU per request) → bench/results/proxy-rate.json.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { cpus } from 'node:os'
import { join } from 'node:path'
import type { Dispatcher } from 'undici'
import { round } from './proxy-load.js'
import { fixedRate, type RateResult } from './proxy-rate.js'

const FIXED_RATE = Number(process.env.CORRAL_BENCH_RATE ?? 3000)
const RATE_SECONDS = Number(process.env.CORRAL_BENCH_RATE_SECONDS ?? 20)
const CONNECTIONS = Number(process.env.CORRAL_BENCH_CONNECTIONS ?? 32)
const loadavg = (): number[] => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number)

export async function rateRun(targets: { name: string; pid?: number; dispatcher: (n?: number) => Dispatcher }[], send: (d: Dispatcher) => Promise<void>, resultsDir: string): Promise<void> {
  const load0 = loadavg()
  const results: Record<string, RateResult> = {}
  for (const t of targets) {
    process.stderr.write(`fixed rate ${FIXED_RATE}/s × ${RATE_SECONDS} s over ${CONNECTIONS} connections: ${t.name} …\n`)
    const d = t.dispatcher(CONNECTIONS)
    // CORRAL_BENCH_PERF=1: `perf record` of each target with a pid over its window → bench/results/prof/perf-<name>.data
    const perfData = process.env.CORRAL_BENCH_PERF && t.pid ? join(resultsDir, 'prof', `perf-${t.name}.data`) : undefined
    if (perfData) mkdirSync(join(resultsDir, 'prof'), { recursive: true })
    results[t.name] = await fixedRate(d, send, { rate: FIXED_RATE, seconds: RATE_SECONDS, ...(t.pid ? { pid: t.pid } : {}), ...(perfData ? { perfData } : {}) })
    await d.close()
  }
  const direct = results.direct!
  const added = Object.fromEntries(Object.entries(results).filter(([n]) => n !== 'direct').map(([n, r]) => [n, {
    p50_ms: round(r.p50_ms - direct.p50_ms), p99_ms: round(r.p99_ms - direct.p99_ms), p999_ms: round(r.p999_ms - direct.p999_ms),
  }]))
  const bump = added['squid-bump']
  const out = {
    machine: { cpus: cpus().length, node: process.version, loadavg_before: load0, loadavg_after: loadavg() },
    rate: FIXED_RATE, seconds: RATE_SECONDS, connections: CONNECTIONS, request: 'POST /v1/messages (body CEL match, 2 header transforms, injected credential, request counter with a ceiling)',
    results, added_over_direct: added,
    target: 'corral added p99 ≤ squid-bump added p99, same run',
    met: bump && added.corral ? added.corral.p99_ms <= bump.p99_ms : null,
  }
  const file = process.env.CORRAL_BENCH_OUT ?? join(resultsDir, 'proxy-rate.json')
  writeFileSync(file, JSON.stringify(out, null, 2) + '\n')
  for (const [name, r] of Object.entries(results)) {
    const a = added[name]
    process.stdout.write(`${name.padEnd(11)} ${String(r.achieved_rps).padStart(7)} req/s  p50 ${String(r.p50_ms).padStart(6)}  p99 ${String(r.p99_ms).padStart(7)}  p99.9 ${String(r.p999_ms).padStart(7)}  max ${String(r.max_ms).padStart(7)} ms  errors ${r.errors}${a ? `  added p99 ${a.p99_ms} ms` : ''}${r.cpu_ms_per_req !== undefined ? `  cpu ${r.cpu_ms_per_req} ms/req (main threads ${r.main_cpu_ms_per_req}, busiest loop ${Math.round((r.main_busy_max ?? 0) * 100)} %, ${r.processes} process${r.processes === 1 ? '' : 'es'})` : ''}  generator ${r.generator_cpu_ms_per_req} ms/req\n`)
  }
  for (const [name, r] of Object.entries(results)) {
    if (r.threads_ms_per_req) process.stdout.write(`  ${name} threads ms/req: ${Object.entries(r.threads_ms_per_req).map(([k, v]) => `${k} ${v}`).join(', ')}\n`)
  }
  process.stdout.write(`load average ${out.machine.loadavg_before.join(' ')} → ${out.machine.loadavg_after.join(' ')}; target met: ${out.met}\nwrote ${file}\n`)
}
