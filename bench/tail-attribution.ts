// What the proxies were doing during the bench client's slowest requests (bench:proxy's open loop run
// with CORRAL_BENCH_TAIL_DIR=<dir>; `npm run bench:tail -- <dir> [share]`). For each target and round
// it takes the slowest `share` of requests (default 0.02) and counts how many overlapped, in the
// proxy's process tree, a GC pause (by kind) or an event-loop stall that was not a GC pause (busy:
// the process used most of the stall's length in CPU; else descheduled), and in the client a stall
// of its own; next to the same share among all requests (the base rate: a cause is one only where
// the slow share is well above it). Also each process's pauses per second and their mean length.
// → stdout and <dir>/attribution.json.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

interface Ev { k: 'gc' | 'stall'; t: number; d: number; kind?: string; cpu?: number }
interface Client { pids: number[]; client: number; at: number[]; lat: number[] }

const [dir, shareArg] = process.argv.slice(2) as [string, string | undefined]
if (!dir) {
  process.stderr.write('usage: bench/tail-attribution.ts <dir> [share of slowest, default 0.02]\n')
  process.exit(2)
}
const share = Number(shareArg ?? 0.02)
const round = (n: number, d = 2): number => Math.round(n * 10 ** d) / 10 ** d

function probe(pid: number): Ev[] {
  const f = join(dir, `probe-${pid}.jsonl`)
  if (!existsSync(f)) return []
  return readFileSync(f, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Ev).sort((a, b) => a.t - b.t)
}

/** Events of `evs` overlapping [from, to] (evs sorted by start; none lasts more than `longest`). */
function overlapping(evs: Ev[], from: number, to: number, longest: number): Ev[] {
  let lo = 0
  let hi = evs.length
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if (evs[mid]!.t < from - longest) lo = mid + 1
    else hi = mid
  }
  const out: Ev[] = []
  for (let i = lo; i < evs.length && evs[i]!.t <= to; i++) if (evs[i]!.t + evs[i]!.d >= from) out.push(evs[i]!)
  return out
}

type Tag = string
function tags(proxy: Ev[], pl: number, client: Ev[], cl: number, from: number, to: number): Set<Tag> {
  const out = new Set<Tag>()
  const gcs = overlapping(proxy, from, to, pl).filter((e) => e.k === 'gc')
  for (const g of gcs) out.add(`proxy gc: ${g.kind}`)
  if (gcs.length) out.add('proxy gc: any')
  for (const s of overlapping(proxy, from, to, pl).filter((e) => e.k === 'stall')) {
    // A stall that a GC pause inside it explains for the most part is counted as GC only.
    const gcIn = gcs.filter((g) => g.t >= s.t - 0.5 && g.t <= s.t + s.d).reduce((a, g) => a + g.d, 0)
    if (gcIn >= s.d / 2) continue
    out.add((s.cpu ?? 0) >= (s.d - gcIn) / 2 ? 'proxy stall: busy' : 'proxy stall: off cpu')
  }
  for (const e of overlapping(client, from, to, cl)) out.add(e.k === 'gc' ? 'client gc' : 'client stall')
  if (out.size === 0) out.add('none of these')
  return out
}

function perSecond(evs: Ev[], span: number, from: number, to: number): Record<string, unknown> {
  const inWin = evs.filter((e) => e.t >= from && e.t <= to)
  const by = new Map<string, number[]>()
  for (const e of inWin) {
    const k = e.k === 'gc' ? `gc ${e.kind}` : 'stall'
    by.set(k, [...(by.get(k) ?? []), e.d])
  }
  return Object.fromEntries([...by].map(([k, ds]) => [k, { per_s: round(ds.length / span), mean_ms: round(ds.reduce((a, b) => a + b, 0) / ds.length), max_ms: round(Math.max(...ds)) }]))
}

const report: Record<string, unknown> = {}
for (const f of readdirSync(dir).filter((n) => n.startsWith('client-') && n.endsWith('.json')).sort()) {
  const c = JSON.parse(readFileSync(join(dir, f), 'utf8')) as Client
  const n = c.lat.length
  if (!n) continue
  const from = Math.min(...c.at)
  const to = Math.max(...c.at.map((a, i) => a + c.lat[i]!))
  const proxy = c.pids.flatMap(probe).sort((a, b) => a.t - b.t)
  const client = probe(c.client)
  const pl = Math.max(0, ...proxy.map((e) => e.d))
  const cl = Math.max(0, ...client.map((e) => e.d))
  const order = [...c.lat.keys()].sort((a, b) => c.lat[b]! - c.lat[a]!)
  const slow = order.slice(0, Math.max(1, Math.round(n * share)))
  const count = (idx: number[]): Map<Tag, number> => {
    const m = new Map<Tag, number>()
    for (const i of idx) for (const t of tags(proxy, pl, client, cl, c.at[i]!, c.at[i]! + c.lat[i]!)) m.set(t, (m.get(t) ?? 0) + 1)
    return m
  }
  const sm = count(slow)
  const all = count(order)
  const sorted = [...c.lat].sort((a, b) => a - b)
  const name = f.slice('client-'.length, -'.json'.length)
  const span = (to - from) / 1000
  report[name] = {
    requests: n, slowest: slow.length, p50_ms: round(sorted[Math.floor(n / 2)]!), p99_ms: round(sorted[Math.floor(n * 0.99)]!), slow_from_ms: round(c.lat[slow[slow.length - 1]!]!),
    overlapped: Object.fromEntries([...new Set([...sm.keys(), ...all.keys()])].sort().map((t) => [t, { slow: round((sm.get(t) ?? 0) / slow.length, 3), all: round((all.get(t) ?? 0) / n, 3) }])),
    proxy_events: perSecond(proxy, span, from, to),
    client_events: perSecond(client, span, from, to),
  }
}
for (const [name, r] of Object.entries(report) as [string, { requests: number; slowest: number; p50_ms: number; p99_ms: number; slow_from_ms: number; overlapped: Record<string, { slow: number; all: number }>; proxy_events: Record<string, unknown>; client_events: Record<string, unknown> }][]) {
  process.stdout.write(`\n${name}: ${r.requests} requests, p50 ${r.p50_ms} ms, p99 ${r.p99_ms} ms; the slowest ${r.slowest} (≥ ${r.slow_from_ms} ms) overlapped:\n`)
  for (const [t, v] of Object.entries(r.overlapped)) process.stdout.write(`  ${t.padEnd(26)} ${String(Math.round(v.slow * 100)).padStart(3)} % of the slowest   ${String(Math.round(v.all * 100)).padStart(3)} % of all\n`)
  process.stdout.write(`  proxy: ${JSON.stringify(r.proxy_events)}\n  client: ${JSON.stringify(r.client_events)}\n`)
}
writeFileSync(join(dir, 'attribution.json'), JSON.stringify({ share, targets: report }, null, 1) + '\n')
