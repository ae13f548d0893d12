// Allocation churn per request from a heap profile bench/tail-probe.mjs wrote on SIGUSR2 (V8's
// sampling heap profiler, objects the young generation collected counted too): bytes per request,
// by the innermost frame of corral's own code (dist/ or src/) and by allocating frame.
//   node bench/tail-heap.mjs <heap-<pid>-1.heapprofile> <requests the process served meanwhile>
import { readFileSync } from 'node:fs'
const [file, reqs] = process.argv.slice(2)
const p = JSON.parse(readFileSync(file, 'utf8'))
const self = new Map(), first = new Map()
let total = 0
const walk = (n, stack) => {
  const f = n.callFrame
  const k = `${f.functionName || '(anon)'} ${f.url.split('/').slice(-2).join('/')}:${f.lineNumber}`
  const s = [...stack, { k, url: f.url }]
  const bytes = n.selfSize
  if (bytes) {
    total += bytes
    self.set(k, (self.get(k) ?? 0) + bytes)
    // the innermost frame of corral's own code (dist/ or src/), else the innermost frame
    const own = [...s].reverse().find((x) => /\/(dist|src)\//.test(x.url) && !x.url.includes('node_modules'))
    const key = own ? own.k : k
    first.set(key, (first.get(key) ?? 0) + bytes)
  }
  for (const c of n.children) walk(c, s)
}
walk(p.head, [])
console.log(`${file}: ${(total / 1048576).toFixed(1)} MB sampled, ${(total / Number(reqs) / 1024).toFixed(1)} KB per request`)
console.log('by innermost own frame:')
for (const [k, v] of [...first].sort((a, b) => b[1] - a[1]).slice(0, 30)) console.log(`  ${(v / Number(reqs) / 1024).toFixed(2).padStart(6)} KB/req  ${k}`)
console.log('by self:')
for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(`  ${(v / Number(reqs) / 1024).toFixed(2).padStart(6)} KB/req  ${k}`)
