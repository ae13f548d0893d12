// The main thread's busy stretches in a --cpu-prof profile (CORRAL_BENCH_PROFILE=1 with
// CORRAL_BENCH_NODE_ARGS=--cpu-prof-interval=100): runs of samples that are not (idle), how often
// they last 1, 2 and 5 ms or more (stretches with a gap over 1 ms between samples, the thread off
// the CPU, are left out), and what they were made of (self time; the first three JS frames).
//   node bench/tail-bursts.mjs <profile.cpuprofile>
import { readFileSync } from 'node:fs'
const [file, fromArg, toArg] = process.argv.slice(2)
const p = JSON.parse(readFileSync(file, 'utf8'))
const byId = new Map(p.nodes.map((n) => [n.id, n]))
const parent = new Map()
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
const name = (n) => `${n.callFrame.functionName || '(anon)'} ${n.callFrame.url.split('/').slice(-2).join('/')}:${n.callFrame.lineNumber}`
let t = p.startTime
const samples = p.samples.map((id, i) => { t += p.timeDeltas[i]; return { id, t } })
// duration of sample i = next sample's t - t
const from = fromArg ? Number(fromArg) * 1000 : -Infinity, to = toArg ? Number(toArg) * 1000 : Infinity
const bursts = []
let cur = null
for (let i = 0; i < samples.length - 1; i++) {
  const s = samples[i], d = samples[i + 1].t - s.t
  if (s.t < from || s.t > to) continue
  const n = byId.get(s.id)
  const idle = n.callFrame.functionName === '(idle)'
  if (idle) { if (cur) { bursts.push(cur); cur = null } ; continue }
  if (!cur) cur = { t: s.t, d: 0, n: 0, self: new Map(), roots: new Map(), maxgap: 0 }
  cur.d += d; cur.n++; cur.maxgap = Math.max(cur.maxgap, d)
  const k = name(n); cur.self.set(k, (cur.self.get(k) ?? 0) + d)
  // the stack path: root-most 4 JS frames
  const stack = []; let id = s.id; while (id !== undefined) { stack.push(byId.get(id)); id = parent.get(id) }
  const js = stack.reverse().filter((x) => x.callFrame.url && !x.callFrame.url.startsWith('node:internal/timers') ).map((x) => x.callFrame.functionName || '(anon)')
  const r = js.slice(0, 3).join(' > ') || k
  cur.roots.set(r, (cur.roots.get(r) ?? 0) + d)
}
const span = (samples[samples.length - 1].t - samples[0].t) / 1e6
const tot = bursts.reduce((a, b) => a + b.d, 0)
console.log(`${file}: ${span.toFixed(1)} s, busy ${(tot / 1e3).toFixed(0)} ms, bursts ${bursts.length}`)
for (const th of [1000, 2000, 5000]) {
  const b = bursts.filter((x) => x.d >= th && x.maxgap < 1000)
  console.log(`  bursts >= ${th / 1000} ms (samples no gap > 1ms): ${(b.length / span).toFixed(2)}/s`)
}
const big = bursts.filter((x) => x.d >= 1000 && x.maxgap < 1000).sort((a, b) => b.d - a.d)
const agg = new Map(), aggr = new Map()
for (const b of big) { for (const [k, v] of b.self) agg.set(k, (agg.get(k) ?? 0) + v); for (const [k, v] of b.roots) aggr.set(k, (aggr.get(k) ?? 0) + v) }
const bt = big.reduce((a, b) => a + b.d, 0)
console.log('  in bursts >= 1 ms, self time:')
for (const [k, v] of [...agg].sort((a, b) => b[1] - a[1]).slice(0, 18)) console.log(`    ${(100 * v / bt).toFixed(1).padStart(5)} %  ${k}`)
console.log('  by root path:')
for (const [k, v] of [...aggr].sort((a, b) => b[1] - a[1]).slice(0, 14)) console.log(`    ${(100 * v / bt).toFixed(1).padStart(5)} %  ${k}`)
console.log('  largest:')
for (const b of big.slice(0, 6)) console.log(`    ${(b.d / 1000).toFixed(2)} ms: ${[...b.roots].sort((a, c) => c[1] - a[1]).slice(0, 3).map(([k, v]) => `${k} ${(v / 1000).toFixed(2)}`).join(' | ')}`)
