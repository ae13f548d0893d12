// Provable log appender benchmark (not a test), SQLite and (when CORRAL_BENCH_PG_URL or
// CORRAL_TEST_PG_URL is set) PostgreSQL:
//  1. catch-up: N rows written by the audit writer with no appender running, then one appender
//     drains the queue: leaves/s, and the main thread's event-loop utilisation and longest stall
//     while it runs (the proxy's event loop in serve);
//  2. sustained: N more rows ingested at the writer's full rate with the appender running beside it
//     as in serve (every second): the ingest rate, the rows still queued when the ingest ended.
// CORRAL_BENCH_ROOT=/path/to/another/checkout runs that checkout's sources (a baseline build) with
// this same driver. Writes bench/results/audit-append[-<label>].json (CORRAL_BENCH_LABEL).
//
//   npm run bench:audit-append                       # 200,000 rows per phase
//   CORRAL_BENCH_EVENTS=50000 CORRAL_BENCH_ROOT=/tmp/base npm run bench:audit-append

import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { randomBytes } from 'node:crypto'
import { monitorEventLoopDelay, performance } from 'node:perf_hooks'
import pg from 'pg'
import type { NewAuditEvent } from '../src/contract/index.js'
import { report } from './audit-report.js'

const N = Number(process.env.CORRAL_BENCH_EVENTS ?? 200_000)
const ROOT = resolve(process.env.CORRAL_BENCH_ROOT ?? resolve(import.meta.dirname, '..'))
const LABEL = process.env.CORRAL_BENCH_LABEL ?? ''
const ORGS = ['org_bench_a', 'org_bench_b', 'org_bench_c', '_platform']

type AuditModule = typeof import('../src/audit/index.js')
type StoreModule = typeof import('../src/store/index.js')
type Store = Awaited<ReturnType<StoreModule['openStore']>>
const audit = (await import(`${ROOT}/src/audit/index.js`)) as AuditModule
const storeMod = (await import(`${ROOT}/src/store/index.js`)) as StoreModule

function event(i: number): NewAuditEvent {
  return {
    org_id: ORGS[i % 7 === 0 ? 3 : i % 3], user_id: i % 4 ? 'usr_a' : 'system', event_type: 'policy_decision', category: 'audit', actor: 'policy-engine',
    workspace_id: `ws_${i % 50}`, agent_role: 'coder', agent_provider: 'anthropic', destination: 'api.anthropic.com', method: 'POST', path: '/v1/messages',
    policy_type: 'http', decision: i % 20 ? 'allow' : 'deny', ...(i % 20 ? {} : { reason: 'no_match' as const }), phase: 'response_body',
    latency_ms: i % 500, transforms_applied: 1, validations_applied: 1,
    debits: { tokens: i % 1000, requests: 1 }, budget_state: { tokens: { used: i, max: 1e9 } }, detail: { upstream_status: 200, response_complete: true },
  }
}

async function ingest(store: Store, from: number, n: number): Promise<number> {
  const writer = audit.createAuditWriter(store, { batchSize: 2_000, maxQueue: 20_000, flushIntervalMs: 5, durableTimeoutMs: 600_000 })
  const t = performance.now()
  const inflight = new Set<Promise<unknown>>()
  for (let i = from; i < from + n; i++) {
    const p: Promise<unknown> = writer.emit(event(i)).finally(() => inflight.delete(p))
    inflight.add(p)
    if (inflight.size >= 5_000) await Promise.race(inflight)
  }
  await Promise.all(inflight)
  await writer.close()
  return performance.now() - t
}

async function queued(store: Store): Promise<number> {
  return (await store.auditLog.pending(10 * N)).length
}

async function run(dialect: string, store: Store, thread: { url: string; schema?: string }) {
  const logger = { error: (o: object, m: string) => console.error(m, o) }
  // As serve runs it: on a thread of its own where the checkout has one (a baseline ignores the option).
  const opts = { store, logger, thread }
  // The thread is started (and the sources loaded on it) before anything is timed.
  const catchUpLog = new audit.ProvableLog(opts)
  await catchUpLog.append()
  process.stderr.write(`[${dialect}] writing ${N.toLocaleString()} rows with no appender…\n`)
  await ingest(store, 0, N)
  const delay = monitorEventLoopDelay({ resolution: 5 })
  const elu0 = performance.eventLoopUtilization()
  delay.enable()
  const cpu0 = process.cpuUsage()
  const t = performance.now()
  const appended = await catchUpLog.append()
  const catchUpMs = performance.now() - t
  const cpu = process.cpuUsage(cpu0)
  await catchUpLog.stop()
  delay.disable()
  const elu = performance.eventLoopUtilization(elu0)
  if (appended !== N) throw new Error(`appended ${appended} of ${N}`)
  process.stderr.write(`[${dialect}] appended ${N.toLocaleString()} in ${Math.round(catchUpMs)} ms; sustained ingest…\n`)

  const log = new audit.ProvableLog(opts)
  await log.append()
  log.start()
  const ingestMs = await ingest(store, N, N)
  const left = await queued(store)
  const t2 = performance.now()
  await log.stop()
  const drain = new audit.ProvableLog(opts)
  await drain.append()
  await drain.stop()
  const drainMs = performance.now() - t2
  let total = 0
  for (const o of ORGS) total += (await store.auditLog.tree(o))?.size ?? 0
  if (total !== 2 * N) throw new Error(`the trees hold ${total} of ${2 * N} rows`)
  return {
    dialect, rows: N,
    append_leaves_per_s: Math.round(N / (catchUpMs / 1000)),
    append_ms: Math.round(catchUpMs),
    // CPU of the whole process (every thread): what a leaf costs, whatever the neighbours do.
    append_leaves_per_cpu_s: Math.round(N / ((cpu.user + cpu.system) / 1e6)),
    append_main_thread_utilisation: +elu.utilization.toFixed(3),
    append_event_loop_max_stall_ms: +(delay.max / 1e6).toFixed(1),
    append_event_loop_p99_ms: +(delay.percentile(99) / 1e6).toFixed(1),
    sustained_ingest_events_per_s: Math.round(N / (ingestMs / 1000)),
    sustained_rows_queued_at_end: left,
    sustained_drain_after_ms: Math.round(drainMs),
  }
}

async function main() {
  // Phases wait on worker threads that are referenced only while busy: keep the process up meanwhile.
  const alive = setInterval(() => {}, 1_000)
  const results = []
  const dir = mkdtempSync(join(tmpdir(), 'corral-bench-append-'))
  try {
    const url = `sqlite:${join(dir, 'bench.db')}`
    const sqlite = await storeMod.openStore(url)
    results.push(await run('sqlite', sqlite, { url }))
    await sqlite.close()
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  const pgUrl = process.env.CORRAL_BENCH_PG_URL || process.env.CORRAL_TEST_PG_URL
  if (pgUrl && process.env.CORRAL_BENCH_SKIP_PG !== '1') {
    const schema = `bench_${randomBytes(4).toString('hex')}`
    const store = await storeMod.openStore(pgUrl, { schema })
    try {
      results.push(await run('postgres', store, { url: pgUrl, schema }))
    } finally {
      await store.close()
      const c = new pg.Client({ connectionString: pgUrl })
      await c.connect()
      await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
      await c.end()
    }
  }
  clearInterval(alive)
  report(`audit-append${LABEL ? `-${LABEL}` : ''}`, { root: ROOT, results }, results)
}

await main()
