// bench:proxy's allocation mode (CORRAL_BENCH_MODE=alloc): bytes each proxy's main thread allocates
// per proxied POST, by corral's own frame, and its scavenges per request. Every proxy loads
// bench/tail-probe.mjs; each target in turn (direct skipped) is warmed at CORRAL_BENCH_RATE (one
// rate, default 300/s) for CORRAL_BENCH_RATE_WARM_SECONDS (default 10, then 2 s in later rounds),
// then SIGUSR2 starts V8's sampling heap profiler (objects the young generation collects counted
// too), CORRAL_BENCH_RATE_SECONDS (default 10) of POSTs run at the rate, and SIGUSR2 writes the
// profile. CORRAL_BENCH_ALLOC_ROUNDS rounds (default 4), the proxies' order reversed every other
// round, so an A/B of two builds (CORRAL_BENCH_BASELINE) alternates which runs first. Bytes per
// request do not depend much on the machine's load: the figure to compare on a shared machine.
// Reports per round and target: KB per request (all of the main thread's allocation while the
// window ran, divided by the requests answered), the top frames (innermost frame of corral's own
// code, as bench/tail-heap.mjs), scavenges (their time, the young generation's size) and
// mark-compacts per 1,000 requests, CPU per request
// and the load average → bench/results/proxy-alloc.json (or CORRAL_BENCH_OUT); CORRAL_BENCH_ALLOC_KEEP=dir keeps
// each window's profile.
import { copyFileSync, existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { cpus } from 'node:os'
import { join, resolve } from 'node:path'
import type { Dispatcher } from 'undici'
import { round } from './proxy-load.js'
import { fixedRate } from './proxy-rate.js'

const RATE = Number((process.env.CORRAL_BENCH_RATE ?? '300').split(',')[0])
const SECONDS = Number(process.env.CORRAL_BENCH_RATE_SECONDS ?? 10)
const WARM_SECONDS = Number(process.env.CORRAL_BENCH_RATE_WARM_SECONDS ?? 10)
const ROUNDS = Math.max(1, Number(process.env.CORRAL_BENCH_ALLOC_ROUNDS ?? 4))
const TOP = 25
const loadavg = (): number[] => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number)
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))

type Target = { name: string; pid?: number; dispatcher: (n?: number) => Dispatcher }
interface HeapNode { callFrame: { functionName: string; url: string; lineNumber: number }; selfSize: number; children: HeapNode[] }

/** Total sampled bytes and bytes by the innermost frame of corral's own code (dist/ or src/, not node_modules), else the innermost frame. */
export function heapByFrame(head: HeapNode): { total: number; frames: Map<string, number> } {
  const frames = new Map<string, number>()
  let total = 0
  const walk = (n: HeapNode, own: string | undefined): void => {
    const f = n.callFrame
    const k = `${f.functionName || '(anon)'} ${f.url.split('/').slice(-2).join('/')}:${f.lineNumber}`
    const mine = /\/(dist|src)\//.test(f.url) && !f.url.includes('node_modules') ? k : own
    if (n.selfSize) {
      total += n.selfSize
      const key = mine ?? k
      frames.set(key, (frames.get(key) ?? 0) + n.selfSize)
    }
    for (const c of n.children) walk(c, mine)
  }
  walk(head, undefined)
  return { total, frames }
}

async function heapFile(dir: string, pid: number, before: Set<string>): Promise<string> {
  for (let i = 0; i < 100; i++) {
    const f = readdirSync(dir).find((x) => x.startsWith(`heap-${pid}-`) && !before.has(x))
    if (f) {
      await sleep(300)
      return join(dir, f)
    }
    await sleep(100)
  }
  throw new Error(`no heap profile from ${pid}`)
}

/** GC events of `pid` between two monotonic times (ms), from the probe's file. */
function gcs(dir: string, pid: number, from: number, to: number): { scavenges: number; scavenge_ms: number; major: number; young_mb: number } {
  const file = join(dir, `probe-${pid}.jsonl`)
  const r = { scavenges: 0, scavenge_ms: 0, major: 0, young_mb: 0 }
  let young = 0
  if (!existsSync(file)) return r
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line) continue
    const e = JSON.parse(line) as { k: string; t: number; d: number; kind: string; young?: number }
    if (e.k !== 'gc' || e.t < from || e.t > to) continue
    if (e.kind === 'scavenge') (r.scavenges++, (r.scavenge_ms += e.d), (young += e.young ?? 0))
    else if (e.kind === 'mark-compact') r.major++
  }
  // The young generation's size after each scavenge (V8 resizes it): scavenges per request follow from it and the bytes.
  r.young_mb = r.scavenges ? round(young / r.scavenges / 1048576, 1) : 0
  return r
}

export async function allocRun(targets: Target[], post: (d: Dispatcher) => Promise<void>, resultsDir: string, dir: string): Promise<void> {
  const proxies = targets.filter((t) => t.pid)
  const load0 = loadavg()
  const rounds: unknown[] = []
  const warmed = new Set<string>()
  const perTarget: Record<string, number[]> = {}
  for (let r = 1; r <= ROUNDS; r++) {
    const order = r % 2 === 0 ? [...proxies].reverse() : proxies
    const results: Record<string, unknown> = {}
    const before = loadavg()
    for (const t of order) {
      const d = t.dispatcher(32)
      try {
        process.stderr.write(`round ${r}: ${t.name} at ${RATE}/s …\n`)
        await fixedRate(d, post, { rate: RATE, seconds: warmed.has(t.name) ? 2 : WARM_SECONDS })
        warmed.add(t.name)
        const files = new Set(readdirSync(dir))
        const l0 = loadavg()
        process.kill(t.pid!, 'SIGUSR2')
        await sleep(200)
        const from = Number(process.hrtime.bigint()) / 1e6
        const x = await fixedRate(d, post, { rate: RATE, seconds: SECONDS, warmSeconds: 0, pid: t.pid! })
        const to = Number(process.hrtime.bigint()) / 1e6
        process.kill(t.pid!, 'SIGUSR2')
        const file = await heapFile(dir, t.pid!, files)
        // CORRAL_BENCH_ALLOC_KEEP=dir: each window's heap profile kept there (bench/tail-heap.mjs reads one).
        if (process.env.CORRAL_BENCH_ALLOC_KEEP) copyFileSync(file, join(process.env.CORRAL_BENCH_ALLOC_KEEP, `heap-${t.name}-${r}.heapprofile`))
        await sleep(1200)
        // The profile spans from the first SIGUSR2 to the second: the 200 ms before the window at no load, the window itself.
        const { total, frames } = heapByFrame((JSON.parse(readFileSync(file, 'utf8')) as { head: HeapNode }).head)
        const n = Math.max(1, x.sent)
        const g = gcs(dir, t.pid!, from, to)
        const kb = round(total / n / 1024, 2)
        ;(perTarget[t.name] ??= []).push(kb)
        results[t.name] = {
          requests: x.sent, errors: x.errors, achieved_rps: x.achieved_rps, kb_per_req: kb,
          scavenges_per_1k: round((g.scavenges / n) * 1000, 2), scavenge_ms_mean: g.scavenges ? round(g.scavenge_ms / g.scavenges, 3) : null,
          scavenge_ms_per_1k: round((g.scavenge_ms / n) * 1000, 2), young_mb: g.young_mb, mark_compacts: g.major,
          cpu_ms_per_req: x.cpu_ms_per_req, main_cpu_ms_per_req: x.main_cpu_ms_per_req, loadavg_before: l0, loadavg_after: loadavg(),
          frames: Object.fromEntries([...frames].sort((a, b) => b[1] - a[1]).slice(0, TOP).map(([k, v]) => [k, round(v / n / 1024, 2)])),
        }
        process.stdout.write(`round ${r} ${t.name.padEnd(14)} ${kb} KB/req  ${(results[t.name] as { scavenges_per_1k: number }).scavenges_per_1k} scavenges/1k req (young ${g.young_mb} MB)  cpu ${x.cpu_ms_per_req} ms/req  load ${l0.join(' ')}\n`)
      } finally {
        await d.close()
      }
    }
    rounds.push({ round: r, order: order.map((t) => t.name), loadavg_before: before, loadavg_after: loadavg(), results })
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN
  const summary = Object.fromEntries(Object.entries(perTarget).map(([k, v]) => [k, { kb_per_req: v, median: median(v) }]))
  const out = {
    machine: { cpus: cpus().length, node: process.version, loadavg_before: load0, loadavg_after: loadavg() },
    rate: RATE, seconds: SECONDS, rounds_count: ROUNDS, request: 'POST /v1/messages (body CEL match, 2 header transforms, injected credential, request counter)',
    rounds, summary,
  }
  const file = resolve(process.env.CORRAL_BENCH_OUT ?? join(resultsDir, 'proxy-alloc.json'))
  writeFileSync(file, JSON.stringify(out, null, 2) + '\n')
  process.stdout.write(`\n${JSON.stringify(summary)}\nwrote ${file}\n`)
}
