// The durable audit path alone (not a test): CPU per event of a journaled writer on SQLite
// (openAuditWriter, as `serve` and `corral proxy` run it) under an open-loop emit rate, for one or
// more builds side by side, alternating. Each build runs in its own child process; CPU is the
// child's whole process (every thread: event loop, SQLite worker, threadpool), minus nothing; the
// event loop's and the busiest other thread's (the SQLite bulk worker) are reported apart.
//
//   node --import tsx bench/audit-durable.ts                          # this checkout, 2,000/s × 5 s
//   CORRAL_BENCH_RATE=3000 node --import tsx bench/audit-durable.ts . /path/to/other/checkout
//
// A checkout is measured from its dist/ (run `npm run build` there first). The event is a
// decision row like the proxy's. Latency is emit() → durable, from the scheduled emit time.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'

const RATE = Number(process.env.CORRAL_BENCH_RATE ?? 2000)
const SECONDS = Number(process.env.CORRAL_BENCH_SECONDS ?? 5)
const ROUNDS = Number(process.env.CORRAL_BENCH_ROUNDS ?? 2)

const decision = () => ({
  org_id: 'org_bench', user_id: 'usr_bench', event_type: 'policy_decision', category: 'audit', actor: 'policy-engine',
  workspace_id: 'ws_0123456789', agent_role: 'bench', agent_provider: 'anthropic', destination: '127.0.0.1:4433', method: 'POST',
  path: '/v1/messages', decision: 'allow', latency_ms: 3, transforms_applied: 3, validations_applied: 0, policy_type: 'http',
  phase: 'response_body', capability_name: 'llm', transforms_failed: {}, auth_used: ['anthropic-key'], auth_failures: {},
  debits: { requests: 1 }, budget_state: { requests: { used: 1234, max: 1_000_000_000 } }, floored: {},
})

/** CPU of one thread of this process in ms, from /proc (clock ticks of 10 ms). */
function threadMs(tid: string): number {
  try {
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8')
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(f[11]) + Number(f[12])) * 10
  } catch {
    return 0
  }
}
const mainThreadMs = () => threadMs(String(process.pid))
/** CPU of every thread but the main one, by thread id. */
const otherThreadsMs = () => new Map(readdirSync('/proc/self/task').filter((t) => t !== String(process.pid)).map((t) => [t, threadMs(t)]))

/** One measurement in this process (the child): prints one JSON line. */
async function child(root: string): Promise<void> {
  const dist = (p: string) => pathToFileURL(join(root, 'dist', p)).href
  const { openAuditWriter } = (await import(dist('audit/index.js'))) as typeof import('../src/audit/index.js')
  const { openStore } = (await import(dist('store/index.js'))) as typeof import('../src/store/index.js')
  const dir = mkdtempSync(join(tmpdir(), 'corral-bench-audit-'))
  try {
    const store = await openStore(`sqlite:${join(dir, 'corral.db')}`)
    const writer = await openAuditWriter(store, { journalDir: join(dir, 'journal') })
    await writer.emit(decision() as never) // spawns the worker, opens the segment
    await writer.flush()
    const n = Math.round(RATE * SECONDS)
    const lat = new Float64Array(n)
    let settled = 0
    const cpu0 = process.cpuUsage()
    const main0 = mainThreadMs()
    const others0 = otherThreadsMs()
    const start = performance.now()
    let issued = 0
    while (issued < n) {
      const due = Math.min(n, Math.floor(((performance.now() - start) * RATE) / 1000) + 1)
      for (; issued < due; issued++) {
        const at = start + (issued * 1000) / RATE
        writer.emit(decision() as never).then(() => void (lat[settled++] = performance.now() - at), () => void settled++)
      }
      await new Promise((r) => setTimeout(r, 1))
    }
    await writer.flush()
    const cpu = process.cpuUsage(cpu0)
    const mainMs = mainThreadMs() - main0
    // The busiest other thread: the SQLite bulk worker.
    const workerMs = Math.max(0, ...[...otherThreadsMs()].map(([t, ms]) => ms - (others0.get(t) ?? 0)))
    const sorted = lat.subarray(0, settled).sort()
    const pct = (p: number) => Math.round(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! * 100) / 100
    process.stdout.write(JSON.stringify({ cpu_us_per_event: Math.round(((cpu.user + cpu.system) / n) * 10) / 10, main_us_per_event: Math.round((mainMs * 1000 / n) * 10) / 10, worker_us_per_event: Math.round((workerMs * 1000 / n) * 10) / 10, p50_ms: pct(50), p99_ms: pct(99) }) + '\n')
    await writer.close()
    await store.close()
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

if (process.env.CORRAL_BENCH_CHILD) {
  await child(process.env.CORRAL_BENCH_CHILD)
} else {
  const roots = (process.argv.length > 2 ? process.argv.slice(2) : ['.']).map((r) => resolve(r))
  process.stdout.write(`durable audit path, ${RATE} events/s × ${SECONDS} s, ${ROUNDS} rounds; load average ${execFileSync('cat', ['/proc/loadavg']).toString().split(' ').slice(0, 3).join(' ')}\n`)
  for (let round = 0; round < ROUNDS; round++) {
    for (const root of roots) {
      const out = execFileSync(process.execPath, ['--import', 'tsx', import.meta.filename], { env: { ...process.env, CORRAL_BENCH_CHILD: root } }).toString().trim()
      const r = JSON.parse(out) as { cpu_us_per_event: number; main_us_per_event: number; worker_us_per_event: number; p50_ms: number; p99_ms: number }
      process.stdout.write(`${root.padEnd(40)} cpu ${String(r.cpu_us_per_event).padStart(6)} us/event (event loop ${r.main_us_per_event}, SQLite worker ${r.worker_us_per_event})  p50 ${r.p50_ms} ms  p99 ${r.p99_ms} ms\n`)
    }
  }
}
