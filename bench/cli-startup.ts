// CLI startup benchmark (not a test): wall-clock time of `corral --version`, `corral --help` and,
// for reference, a command help that goes through oclif. Target: --version and --help < 150 ms.
// Run after `npm run build`: `npm run bench:cli` → prints a table, writes bench/results/cli-startup.json.

import { spawnSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('../', import.meta.url))
const runs = Number(process.env.BENCH_RUNS ?? 20)
const TARGET_MS = 150
const cases: { name: string; argv: string[]; target?: number }[] = [
  { name: 'corral --version', argv: ['--version'], target: TARGET_MS },
  { name: 'corral --help', argv: ['--help'], target: TARGET_MS },
  { name: 'corral audit query --help', argv: ['audit', 'query', '--help'] },
  { name: 'node -e 0 (floor)', argv: [] },
]

function once(argv: string[]): number {
  const start = process.hrtime.bigint()
  const args = argv.length ? ['bin/run.js', ...argv] : ['-e', '0']
  const r = spawnSync(process.execPath, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] })
  const ms = Number(process.hrtime.bigint() - start) / 1e6
  if (r.status !== 0) throw new Error(`${argv.join(' ')} exited ${r.status}: ${r.stderr}`)
  return ms
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]
// Rounds interleave the cases, so a load change on a shared machine hits every case alike.
for (const c of cases) once(c.argv) // warm the file cache
const samples = cases.map(() => [] as number[])
for (let round = 0; round < runs; round++) cases.forEach((c, i) => samples[i].push(once(c.argv)))
const results = cases.map((c, i) => {
  const times = samples[i].sort((a, b) => a - b)
  const p50 = pct(times, 50)
  return { name: c.name, runs, p50_ms: +p50.toFixed(1), p95_ms: +pct(times, 95).toFixed(1), min_ms: +times[0].toFixed(1), target_ms: c.target, ok: c.target === undefined ? undefined : p50 < c.target }
})

// On a busy machine absolute times inflate; the time above bare Node is the part corral controls.
const floor = results.at(-1)!.p50_ms
for (const r of results) Object.assign(r, { over_floor_ms: +(r.p50_ms - floor).toFixed(1) })
console.table(results)
mkdirSync(new URL('results/', import.meta.url), { recursive: true })
const out = new URL('results/cli-startup.json', import.meta.url)
writeFileSync(out, JSON.stringify({ at: new Date().toISOString(), node: process.version, results }, null, 2) + '\n')
console.log(`wrote ${fileURLToPath(out)}`)
