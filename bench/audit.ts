// Audit log benchmark (not a test): durable ingest through the journaled writer (as serve runs it:
// events/s until the last row is in the database, and CPU per event), filtered first pages, a
// deep cursor page and a grouped time-bucketed stats query, at 1M events, on SQLite and (when
// CORRAL_BENCH_PG_URL or CORRAL_TEST_PG_URL is set) Postgres. Writes bench/results/audit.json and
// prints a table. Targets: durable ingest >= 50,000 events/s on SQLite and 30,000 on PostgreSQL,
// filtered page p95 <= 20 ms, stats <= 1 s. bench/audit-ingest.ts compares builds in one run.
//
// The ingest runs once per provable-log variant on a fresh store of each dialect, in one run:
// `on` is serve (the queue trigger, the appender on its thread every second), `off` a writer
// without the log (the queue trigger dropped, no appender); rounds alternate the order. Each
// reports events/s, CPU per event (the whole process: every thread, the appender's included) and,
// with the log on, the rows still queued for the log when the ingest ended and the catch-up time.
// The queries run on the first `on` store.
//
//   npm run bench:audit                 # 1,000,000 events, variants on,off, one round
//   CORRAL_BENCH_EVENTS=200000 CORRAL_BENCH_LOG=on,off CORRAL_BENCH_LOG_ROUNDS=2 npm run bench:audit
//   CORRAL_BENCH_LOG=on npm run bench:audit      # serve's configuration only

import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { sql } from 'kysely'
import pg from 'pg'
import { auditStats, openAuditWriter, ProvableLog, queryAudit } from '../src/audit/index.js'
import type { NewAuditEvent } from '../src/contract/index.js'
import { encodeCursor } from '../src/audit/cursor.js'
import { cursorBinding } from '../src/audit/query.js'
import { openStore, type Store } from '../src/store/index.js'
import { dropLogQueueTriggers } from './audit-log-switch.js'
import { loadLine, report } from './audit-report.js'

const N = Number(process.env.CORRAL_BENCH_EVENTS ?? 1_000_000)
const ORG = 'org_bench'
const SPAN_MS = 7 * 24 * 3_600_000
const START = Date.parse('2026-01-01T00:00:00.000Z')
const PAGE_RUNS = 50
const VARIANTS = (process.env.CORRAL_BENCH_LOG ?? 'on,off').split(',').map((v) => v.trim())
const ROUNDS = Number(process.env.CORRAL_BENCH_LOG_ROUNDS ?? 1)
const PG_URL = process.env.CORRAL_BENCH_PG_URL || process.env.CORRAL_TEST_PG_URL
const TARGETS = { ingest_events_per_s: { sqlite: 50_000, postgres: 30_000 }, filtered_page_p95_ms: 20, stats_ms: 1_000 }

const DESTS = ['api.anthropic.com', 'api.openai.com', 'github.com', 'pypi.org', 'registry.npmjs.org']

const USERS = ['usr_a', 'usr_b', 'usr_c', 'system']
const ROLES = ['coder', 'reviewer']
const WORKSPACES = Array.from({ length: 50 }, (_, i) => `ws_${i}`)

// Object literals of fixed shape, as real producers (the proxy) build events: the generator's own
// cost is part of the measured ingest time, and spreads of conditional objects cost more per event
// on this machine than the writer's validation does.
function event(i: number): NewAuditEvent {
  const timestamp = new Date(START + Math.floor((i / N) * SPAN_MS)).toISOString()
  const user_id = USERS[i % 4]
  const workspace_id = WORKSPACES[i % 50]
  const agent_role = ROLES[i % 2]
  if (i % 10 === 9) {
    return {
      org_id: ORG, user_id, timestamp, workspace_id, agent_role, agent_provider: 'anthropic',
      event_type: 'tool_call', category: 'activity', actor: 'agent', detail: { tool: 'bash', n: i % 7 },
    }
  }
  const destination = DESTS[i % DESTS.length]
  const method = i % 3 ? 'POST' : 'GET'
  const latency_ms = (i * 7) % 500
  if (i % 20 === 0) {
    return {
      org_id: ORG, user_id, timestamp, workspace_id, agent_role, agent_provider: 'anthropic',
      event_type: 'policy_decision', category: 'audit', actor: 'policy-engine', destination, method, path: '/v1/messages',
      decision: 'deny', reason: 'no_match', latency_ms, transforms_applied: 1, validations_applied: 1, policy_type: 'http',
      phase: 'request_headers',
    }
  }
  return {
    org_id: ORG, user_id, timestamp, workspace_id, agent_role, agent_provider: 'anthropic',
    event_type: 'policy_decision', category: 'audit', actor: 'policy-engine', destination, method, path: '/v1/messages',
    decision: 'allow', latency_ms, transforms_applied: 1, validations_applied: 1, policy_type: 'http',
    phase: 'response_body', capability_name: 'messages',
    debits: { tokens: (i * 13) % 4000, requests: 1 }, budget_state: { tokens: { used: i % 100000, max: 1000000 } },
  }
}

/** CPU of this process's main thread in ms, from /proc (clock ticks of 10 ms). */
function mainThreadMs(): number {
  const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8')
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(f[11]) + Number(f[12])) * 10
}

function pct(samples: number[], p: number): number {
  const s = [...samples].sort((a, b) => a - b)
  return +s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)].toFixed(2)
}

async function timed<T>(fn: () => Promise<T>): Promise<[number, T]> {
  const t = performance.now()
  const out = await fn()
  return [performance.now() - t, out]
}

async function pageStats(fn: () => Promise<unknown>) {
  await fn() // warm-up
  const samples: number[] = []
  for (let i = 0; i < PAGE_RUNS; i++) samples.push((await timed(fn))[0])
  return { p50_ms: pct(samples, 50), p95_ms: pct(samples, 95) }
}

type Variant = 'on' | 'off'

/** The journaled writer as serve runs it, N events, with the provable log on or off; the store is fresh. */
async function ingest(dialect: string, store: Store, thread: { url: string; schema?: string }, variant: Variant, round: number) {
  process.stderr.write(`[${dialect}] log ${variant}, round ${round}: ingesting ${N.toLocaleString()} events through the writer…\n`)
  if (variant === 'off') await dropLogQueueTriggers(dialect, async (text) => (await sql.raw<Record<string, unknown>>(text).execute(store.db)).rows)
  // The writer as serve runs it: the journal on, default batch and queue bounds; an event is
  // durable once journaled, and the ingest ends when the last row is committed to the database.
  const journalDir = mkdtempSync(join(tmpdir(), 'corral-bench-journal-'))
  const writer = await openAuditWriter(store, { journalDir })
  const logger = { error: (o: object, m: string) => console.error(m, o) }
  // With the log on, the appender runs beside the writer as in serve (docs/audit.md), on its thread.
  // It yields to the writer's backlog as in serve (pacing, docs/audit.md).
  const log = variant === 'on' ? new ProvableLog({ store, logger, thread, writerBusy: () => writer.backlogged() }) : undefined
  // Its thread started and its sources loaded before anything is timed, as in a serve that has run a while.
  await log?.append()
  log?.start()
  const load0 = loadavg()
  const cpuBefore = process.cpuUsage()
  const mainBefore = mainThreadMs()
  const [ingestMs] = await timed(async () => {
    // emit() resolves once the event is in the journal; the queue of events not yet in the
    // database is bounded (20,000, beyond which emit refuses, as the proxy then denies): stay
    // short of it, as producers that back off would.
    let refused = 0
    const onRefused = () => void refused++
    for (let i = 0; i < N; i++) {
      void writer.emit(event(i)).catch(onRefused)
      if ((i & 255) === 0) while (writer.stats().pending >= 18_000) await new Promise((r) => setTimeout(r, 1))
    }
    await writer.close()
    if (refused > 0) throw new Error(`${refused} events refused`)
  })
  rmSync(journalDir, { recursive: true, force: true })
  const cpu = process.cpuUsage(cpuBefore)
  const mainMs = mainThreadMs() - mainBefore
  const out = {
    dialect, variant, round, events: N,
    ingest_events_per_s: Math.round(N / (ingestMs / 1000)),
    ingest_ms: Math.round(ingestMs),
    // On a shared machine wall-clock rate depends on the neighbours; CPU time of this process (every
    // thread: the SQLite insert worker, the appender's) shows the rate one core sustains.
    ingest_events_per_cpu_s: Math.round(N / ((cpu.user + cpu.system) / 1e6)),
    ingest_cpu_us_per_event: Math.round(((cpu.user + cpu.system) / N) * 10) / 10,
    ingest_main_thread_us_per_event: Math.round(((mainMs * 1000) / N) * 10) / 10,
    loadavg_before: load0,
    loadavg_after: loadavg(),
  }
  if (!log) return out
  // The appender's lag: rows committed but not yet in a tree when the last row was committed.
  const queued = await store.auditLog.pending(N)
  // Until the queue is empty: the round in flight and the rest.
  const [catchUpMs] = await timed(async () => {
    await log.stop()
    await new ProvableLog({ store, logger }).append()
  })
  const treeSize = (await store.auditLog.tree(ORG))?.size ?? 0
  if (treeSize !== N) throw new Error(`the tree holds ${treeSize} of ${N} rows`)
  process.stderr.write(`[${dialect}] log on: ${queued.length} rows queued when the ingest ended, caught up in ${Math.round(catchUpMs)} ms\n`)
  return { ...out, log_rows_queued_at_end: queued.length, log_catch_up_ms: Math.round(catchUpMs) }
}

async function queries(dialect: string, store: Store) {
  process.stderr.write(`[${dialect}] querying…\n`)
  const filtered = await pageStats(() => queryAudit(store, ORG, { filter: ['decision=deny'], limit: 100 }))
  const filteredWs = await pageStats(() => queryAudit(store, ORG, { filter: ['event_type=policy_decision', 'destination=github.com'], limit: 100 }, { workspaceId: 'ws_7' }))
  const filteredOwn = await pageStats(() => queryAudit(store, ORG, { filter: ['counter=tokens'], limit: 100 }, { userId: 'usr_b' }))

  // A cursor half-way through the log, as a client paging 5,000 pages deep would hold.
  const mid = (await store.audit.page(ORG, { filters: [], order: 'desc', limit: 1, toMs: START + SPAN_MS / 2 }))[0]
  const deepQuery = { filter: ['decision=allow'], limit: 100 }
  const binding = cursorBinding(ORG, { filters: [{ column: 'decision', op: 'in', values: ['allow'] }], order: 'desc' }, {})
  const cursor = await encodeCursor(store, binding, { ts: Date.parse(mid.timestamp), id: mid.id })
  const deep = await pageStats(() => queryAudit(store, ORG, { ...deepQuery, cursor }))

  const [statsMs, statsOut] = await timed(() => auditStats(store, ORG, { group_by: 'decision', time_bucket: 'auto' }))
  const [topMs] = await timed(() => auditStats(store, ORG, { top: '3:destination', metric: 'sum:debits.tokens', time_bucket: '1d' }))
  return {
    dialect,
    filtered_page: filtered,
    filtered_page_workspace: filteredWs,
    filtered_page_own_counter: filteredOwn,
    deep_cursor_page: deep,
    stats_group_by_time_bucket_ms: Math.round(statsMs),
    stats_buckets: statsOut.buckets.length,
    stats_top_sum_debits_ms: Math.round(topMs),
  }
}

/** A fresh store of `dialect` for `use`, removed afterwards. */
async function withStore<T>(dialect: string, use: (store: Store, thread: { url: string; schema?: string }) => Promise<T>): Promise<T> {
  if (dialect === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'corral-bench-'))
    const url = `sqlite:${join(dir, 'bench.db')}`
    const store = await openStore(url)
    try {
      return await use(store, { url })
    } finally {
      await store.close()
      rmSync(dir, { recursive: true, force: true })
    }
  }
  const schema = `bench_${randomBytes(4).toString('hex')}`
  const store = await openStore(PG_URL!, { schema })
  try {
    return await use(store, { url: PG_URL!, schema })
  } finally {
    await store.close()
    const c = new pg.Client({ connectionString: PG_URL })
    await c.connect()
    await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
    await c.end()
  }
}

async function main() {
  // The appender's thread is referenced only while busy: keep the process up between phases.
  const alive = setInterval(() => {}, 1_000)
  const dialects = PG_URL ? ['sqlite', 'postgres'] : ['sqlite']
  if (!PG_URL) process.stderr.write('postgres: skipped (set CORRAL_BENCH_PG_URL or CORRAL_TEST_PG_URL)\n')
  const runs: Array<Awaited<ReturnType<typeof ingest>>> = []
  const queried: Array<Awaited<ReturnType<typeof queries>>> = []
  for (let round = 1; round <= ROUNDS; round++) {
    for (const dialect of dialects) {
      // Alternating order round by round: neither variant always runs on the warmer machine.
      const order = round % 2 === 1 ? VARIANTS : [...VARIANTS].reverse()
      for (const variant of order) {
        if (variant !== 'on' && variant !== 'off') throw new Error(`CORRAL_BENCH_LOG: unknown variant ${variant} (on, off)`)
        await withStore(dialect, async (store, thread) => {
          runs.push(await ingest(dialect, store, thread, variant, round))
          if (variant === 'on' && !queried.some((q) => q.dialect === dialect)) queried.push(await queries(dialect, store))
        })
        process.stderr.write(`[${dialect}] log ${variant}: ${runs[runs.length - 1].ingest_events_per_s.toLocaleString()} events/s, ${runs[runs.length - 1].ingest_cpu_us_per_event} us CPU/event; ${loadLine()}\n`)
      }
    }
  }
  clearInterval(alive)

  const rows = [
    ...runs.map((r) => ({
      dialect: r.dialect, log: r.variant, round: r.round,
      'ingest ev/s': r.ingest_events_per_s,
      'cpu us/ev (main)': `${r.ingest_cpu_us_per_event} (${r.ingest_main_thread_us_per_event})`,
      'queued at end': 'log_rows_queued_at_end' in r ? r.log_rows_queued_at_end : '',
      'catch-up ms': 'log_catch_up_ms' in r ? r.log_catch_up_ms : '',
      load: r.loadavg_after.map((l) => l.toFixed(1)).join(' '),
    })),
  ]
  const pages = queried.map((r) => ({
    dialect: r.dialect,
    'page p50/p95 ms': `${r.filtered_page.p50_ms} / ${r.filtered_page.p95_ms}`,
    'ws page p95': r.filtered_page_workspace.p95_ms,
    'own+counter p95': r.filtered_page_own_counter.p95_ms,
    'deep page p50/p95 ms': `${r.deep_cursor_page.p50_ms} / ${r.deep_cursor_page.p95_ms}`,
    'stats ms': r.stats_group_by_time_bucket_ms,
    'top+sum ms': r.stats_top_sum_debits_ms,
  }))
  if (pages.length > 0) console.table(pages)
  report('audit', { targets: TARGETS, variants: VARIANTS, rounds: ROUNDS, ingest: runs, queries: queried }, rows, [
    `targets: durable ingest >= ${TARGETS.ingest_events_per_s.sqlite} ev/s (sqlite), ${TARGETS.ingest_events_per_s.postgres} ev/s (postgres), page p95 <= ${TARGETS.filtered_page_p95_ms} ms, stats <= ${TARGETS.stats_ms} ms`,
  ])
}

await main()
