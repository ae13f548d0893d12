// Policy compiler benchmark (not a test). Measures:
// - compile time of a generated 200-capability document (target ≤ 200 ms, median of runs)
// - evaluations per second of admission match (target ≥ 500k/s), a header transform and an SSE
//   counter extraction
// - `corral caps lint examples/*.yaml` wall time as a whole process (target ≤ 400 ms; needs `npm run build`)
// Run: `npm run bench:policy` → prints a table, writes bench/results/policy.json.

import { spawnSync } from 'node:child_process'
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { compilePolicy, type CompiledPolicy, type PolicyRequest } from '../src/policy/index.js'

const root = fileURLToPath(new URL('../', import.meta.url))

function bigDocument(n: number): string {
  let s = ''
  for (let i = 0; i < n; i++) {
    s += `- name: cap-${i}
  type: http
  allow:
    - name: read
      domains: [api${i}.example.com, "*.cdn${i}.example.net"]
      methods: [GET, HEAD]
      paths: ["/v1/items/*", "/v1/search"]
    - name: write
      domains: [api${i}.example.com]
      methods: [POST]
      paths: [/v1/items]
      request_format: application/json
      request_schema: {type: object, required: [name], properties: {name: {type: string, maxLength: ${50 + i}}}}
      match: {expr: 'request.headers["x-team"] == "team-${i}"'}
  transforms:
    - name: key
      header: {name: Authorization, action: set, value: '"Bearer " + secrets["k${i}"]'}
    - header: {name: Accept-Encoding, action: set, value: '"identity"'}
  budgets:
    counters:
      - {name: calls, source: request.count, workspace: {max: 1000, ttl: 1h}}
      - name: tokens
        source: response
        requires_body: true
        framing: sse
        format: application/json
        encoding: identity
        status_codes: ["2xx"]
        accumulator: sum
        value: int(event.data.n)
        terminal_sentinel: "[DONE]"
        workspace: {max: 100000}
`
  }
  return s
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]
}

function rate(fn: () => void, minMs = 500): number {
  // Warm up (JIT, memo caches) for a fixed time before measuring.
  const warm = performance.now()
  while (performance.now() - warm < 200) for (let i = 0; i < 1000; i++) fn()
  let n = 0
  const start = performance.now()
  let elapsed = 0
  while (elapsed < minMs) {
    for (let i = 0; i < 1000; i++) fn()
    n += 1000
    elapsed = performance.now() - start
  }
  return Math.round((n / elapsed) * 1000)
}

// Compile: first run pays one-time costs (ajv meta-schemas, CEL environments); report both.
const doc = bigDocument(200)
const compileTimes: number[] = []
// Process CPU time (user + system, GC threads included) as well: on a loaded machine it moves less than wall time.
const compileCpu: number[] = []
let policy: CompiledPolicy | undefined
for (let i = 0; i < 9; i++) {
  const c0 = process.cpuUsage()
  const t0 = performance.now()
  const res = compilePolicy(doc + `# run ${i}\n`)
  compileTimes.push(performance.now() - t0)
  const c = process.cpuUsage(c0)
  compileCpu.push((c.user + c.system) / 1000)
  if (!res.ok) throw new Error(JSON.stringify(res.diagnostics.slice(0, 3)))
  policy = res.policy
}
const p = policy!
const coldCompile = compileTimes[0]
const warmCompile = median(compileTimes.slice(1))
const warmCompileCpu = median(compileCpu.slice(1))

// Admission: the last capability's rule (worst case: 199 capabilities tried first).
const admitReq: PolicyRequest = { method: 'GET', scheme: 'https', host: 'api199.example.com', path: '/v1/items/42', rawQuery: '', headers: { accept: 'application/json' } }
const check = p.admit(admitReq, {})
if (check.decision !== 'allow') throw new Error('bench request must be allowed')
const admitFirst: PolicyRequest = { ...admitReq, host: 'api0.example.com' }
const admitWorst = rate(() => void p.admit(admitReq, {}))
const admitBest = rate(() => void p.admit(admitFirst, {}))

// Header transform: the Authorization + Accept-Encoding transforms of one capability.
const match = check.match
const headerRate = rate(() => void p.applyTransforms({ match, request: admitReq, context: {}, secrets: () => 'sk-bench' }))

// SSE extraction: one event per feed.
const sse = p.counters('cap-0')[1]
const view = { status: 200, headers: { 'content-type': 'text/event-stream' }, size: 0 }
let meter = sse.meter(view)
let fed = 0
const sseRate = rate(() => {
  meter.feed('data: {"n": 3}\n\n')
  if (++fed % 10_000 === 0) {
    meter.end()
    meter = sse.meter(view)
  }
})

// Lint as a process, interleaved with `node -e 0` (the floor no Node program gets under) so that
// load on a shared machine hits both alike; the first round warms the file cache and is dropped.
const examples = readdirSync(new URL('../examples/', import.meta.url)).filter((f) => f.endsWith('.yaml')).map((f) => `examples/${f}`)
const lintTimes: number[] = []
const floorTimes: number[] = []
function timed(args: string[]): number {
  const t0 = performance.now()
  const r = spawnSync(process.execPath, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] })
  if (r.status !== 0) throw new Error(`${args.join(' ')} exited ${r.status}: ${r.stderr}`)
  return performance.now() - t0
}
for (let i = 0; i < 8; i++) {
  const floor = timed(['-e', '0'])
  const lint = timed(['bin/run.js', 'caps', 'lint', ...examples])
  if (i > 0) {
    floorTimes.push(floor)
    lintTimes.push(lint)
  }
}
const lintMs = median(lintTimes)
const floorMs = median(floorTimes)

const results = {
  compile_200_capabilities_ms: { value: +warmCompile.toFixed(1), cold_ms: +coldCompile.toFixed(1), cpu_ms: +warmCompileCpu.toFixed(1), target: 200, ok: warmCompile <= 200 },
  admission_match_per_s: { value: admitWorst, best_case: admitBest, target: 500_000, ok: admitWorst >= 500_000 },
  header_transform_per_s: { value: headerRate },
  sse_event_extraction_per_s: { value: sseRate },
  caps_lint_examples_process_ms: { value: +lintMs.toFixed(1), node_floor_ms: +floorMs.toFixed(1), files: examples.length, target: 400, ok: lintMs <= 400 },
}
console.table(Object.fromEntries(Object.entries(results).map(([k, v]) => [k, v])))
mkdirSync(new URL('results/', import.meta.url), { recursive: true })
const out = new URL('results/policy.json', import.meta.url)
writeFileSync(out, JSON.stringify({ at: new Date().toISOString(), node: process.version, results }, null, 2) + '\n')
console.log(`wrote ${fileURLToPath(out)}`)
