// Lays the provable log's appender over bench:proxy's latency windows: for each window of a target
// whose appender traced (CORRAL_BENCH_APPENDER_TRACE=dir), the rows queued for the log at its start
// and end of the measured part and the appender process's CPU over it (cores: CPU ms per ms), next
// to the window's added p99. Reads the JSON of `npm run bench:proxy` (runs[].windows) or of its rate
// mode (rounds[].windows).
//
//   node --import tsx bench/appender-trace.ts bench/results/proxy-rate.json /tmp/trace
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

interface Window { target: string; phase: string; from: number; to: number }
interface Sample { t: number; queued: number; cpu_ms: number }

const [file, dir] = process.argv.slice(2)
if (!file || !dir) throw new Error('usage: appender-trace.ts <bench json> <trace dir>')
const doc = JSON.parse(readFileSync(file, 'utf8')) as {
  seconds?: number
  settings?: { latency_seconds: number }
  runs?: Array<{ run: number; windows?: Window[]; targets: Record<string, Record<string, number>> }>
  rounds?: Array<{ round: number; windows?: Window[]; added_over_direct: Record<string, { p99_ms: number }> }>
}
const measured = (doc.seconds ?? doc.settings?.latency_seconds ?? 5) * 1000
const traces = new Map<string, Sample[]>()
const trace = (target: string, run: number): Sample[] => {
  const key = `appender-${target}-${run}.jsonl`
  if (!traces.has(key)) {
    const f = join(dir, key)
    traces.set(key, existsSync(f) ? readFileSync(f, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as Sample) : [])
  }
  return traces.get(key)!
}
/** The last sample at or before t. */
const at = (s: Sample[], t: number): Sample | undefined => s.filter((x) => x.t <= t).at(-1)

const rows: Array<Record<string, unknown>> = []
const lay = (run: number, label: string, windows: Window[], p99: (target: string, phase: string) => number | undefined) => {
  for (const w of windows) {
    const s = trace(w.target, run)
    if (s.length === 0) continue
    // The measured part is the window's end (a warm-up at the same rate comes first).
    const from = w.phase === 'backlog' ? w.from : w.to - measured
    const a = at(s, from)
    const b = at(s, w.to)
    if (!a || !b || b.t === a.t) continue
    rows.push({ at: label, target: w.target, phase: w.phase, queued_from: a.queued, queued_to: b.queued, appender_cores: Math.round(((b.cpu_ms - a.cpu_ms) / (b.t - a.t)) * 100) / 100, added_p99_ms: p99(w.target, w.phase) })
  }
}
for (const r of doc.runs ?? []) lay(r.run, `run ${r.run}`, r.windows ?? [], (t, ph) => r.targets[t]?.[`${ph}_added_p99_ms`])
for (const r of doc.rounds ?? []) lay(0, `round ${r.round}`, r.windows ?? [], (t) => r.added_over_direct[t]?.p99_ms)
console.table(rows)
process.stdout.write(`${JSON.stringify(rows)}\n`)
