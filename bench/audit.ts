// Audit log benchmark (not a test): durable ingest through the journaled writer (as serve runs it:
// events/s until the last row is in the database, and CPU per event), filtered first pages, a
// deep cursor page and a grouped time-bucketed stats query, at 1M events, on SQLite and (when
// CORRAL_BENCH_PG_URL or CORRAL_TEST_PG_URL is set) Postgres. Writes bench/results/audit.json and
// prints a table. Targets: durable ingest >= 50,000 events/s on SQLite and 30,000 on PostgreSQL,
// filtered page p95 <= 20 ms, stats <= 1 s. bench/audit-ingest.ts compares builds in one run.
//
//   npm run bench:audit                 # 1,000,000 events
//   CORRAL_BENCH_EVENTS=100000 npm run bench:audit

import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { auditStats, openAuditWriter, ProvableLog, queryAudit } from '../src/audit/index.js'
import type { NewAuditEvent } from '../src/contract/index.js'
import { encodeCursor } from '../src/audit/cursor.js'
import { cursorBinding } from '../src/audit/query.js'
import { openStore, type Store } from '../src/store/index.js'

const N = Number(process.env.CORRAL_BENCH_EVENTS ?? 1_000_000)
const ORG = 'org_bench'
const SPAN_MS = 7 * 24 * 3_600_000
const START = Date.parse('2026-01-01T00:00:00.000Z')
const PAGE_RUNS = 50
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

async function run(dialect: string, store: Store, thread: { url: string; schema?: string }) {
  process.stderr.write(`[${dialect}] ingesting ${N.toLocaleString()} events through the writer…\n`)
  // The writer as serve runs it: the journal on, default batch and queue bounds; an event is
  // durable once journaled, and the ingest ends when the last row is committed to the database.
  const journalDir = mkdtempSync(join(tmpdir(), 'corral-bench-journal-'))
  const writer = await openAuditWriter(store, { journalDir })
  // The provable log's appender runs beside the writer as in serve (docs/audit.md); its catch-up
  // after the ingest is timed on its own.
  const logger = { error: (o: object, m: string) => console.error(m, o) }
  const log = new ProvableLog({ store, logger, thread })
  log.start()
  const cpuBefore = process.cpuUsage()
  const mainBefore = mainThreadMs()
  const [ingestMs] = await timed(async () => {
    // emit() resolves once the event is committed: keep a window of producers in flight (like
    // concurrent requests) so batches fill, below maxQueue so nothing is refused.
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
  await log.stop()
  const [appendCatchUpMs, appended] = await timed(() => new ProvableLog({ store, logger }).append())
  const treeSize = (await store.auditLog.tree(ORG))?.size ?? 0
  if (treeSize !== N) throw new Error(`the tree holds ${treeSize} of ${N} rows`)
  process.stderr.write(`[${dialect}] appender caught up in ${Math.round(appendCatchUpMs)} ms (${appended} rows left after the ingest)\n`)
  const ingest = Math.round(N / (ingestMs / 1000))
  // On a shared machine wall-clock rate depends on the neighbours; CPU time of this process (which
  // includes SQLite's work, done on the store's insert worker thread) shows the rate one core sustains.
  const ingestPerCpu = Math.round(N / ((cpu.user + cpu.system) / 1e6))
  const cpuUsPerEvent = Math.round(((cpu.user + cpu.system) / N) * 10) / 10
  const mainUsPerEvent = Math.round(((mainMs * 1000) / N) * 10) / 10
  process.stderr.write(`[${dialect}] ingest ${ingest.toLocaleString()} events/s; querying…\n`)

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
    events: N,
    ingest_events_per_s: ingest,
    ingest_ms: Math.round(ingestMs),
    log_catch_up_ms: Math.round(appendCatchUpMs),
    log_rows_after_ingest: appended,
    ingest_events_per_cpu_s: ingestPerCpu,
    ingest_cpu_us_per_event: cpuUsPerEvent,
    ingest_main_thread_us_per_event: mainUsPerEvent,
    filtered_page: filtered,
    filtered_page_workspace: filteredWs,
    filtered_page_own_counter: filteredOwn,
    deep_cursor_page: deep,
    stats_group_by_time_bucket_ms: Math.round(statsMs),
    stats_buckets: statsOut.buckets.length,
    stats_top_sum_debits_ms: Math.round(topMs),
  }
}

async function main() {
  const results = []
  const dir = mkdtempSync(join(tmpdir(), 'corral-bench-'))
  try {
    const sqlite = await openStore(`sqlite:${join(dir, 'bench.db')}`)
    results.push(await run('sqlite', sqlite, { url: `sqlite:${join(dir, 'bench.db')}` }))
    await sqlite.close()
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  const pgUrl = process.env.CORRAL_BENCH_PG_URL || process.env.CORRAL_TEST_PG_URL
  if (pgUrl) {
    const schema = `bench_${randomBytes(4).toString('hex')}`
    const store = await openStore(pgUrl, { schema })
    try {
      results.push(await run('postgres', store, { url: pgUrl, schema }))
    } finally {
      await store.close()
      const c = new pg.Client({ connectionString: pgUrl })
      await c.connect()
      await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
      await c.end()
    }
  } else {
    process.stderr.write('postgres: skipped (set CORRAL_BENCH_PG_URL or CORRAL_TEST_PG_URL)\n')
  }

  // The load average matters on a shared machine: record it next to the numbers.
  const out = { at: new Date().toISOString(), node: process.version, cpus: cpus().length, loadavg: loadavg(), targets: TARGETS, results }
  const file = resolve(import.meta.dirname, 'results/audit.json')
  mkdirSync(resolve(import.meta.dirname, 'results'), { recursive: true })
  writeFileSync(file, JSON.stringify(out, null, 2) + '\n')

  const rows = results.map((r) => ({
    dialect: r.dialect,
    'ingest ev/s': r.ingest_events_per_s,
    'cpu us/ev (main)': `${r.ingest_cpu_us_per_event} (${r.ingest_main_thread_us_per_event})`,
    'page p50/p95 ms': `${r.filtered_page.p50_ms} / ${r.filtered_page.p95_ms}`,
    'ws page p95': r.filtered_page_workspace.p95_ms,
    'own+counter p95': r.filtered_page_own_counter.p95_ms,
    'deep page p50/p95 ms': `${r.deep_cursor_page.p50_ms} / ${r.deep_cursor_page.p95_ms}`,
    'stats ms': r.stats_group_by_time_bucket_ms,
    'top+sum ms': r.stats_top_sum_debits_ms,
  }))
  console.table(rows)
  console.log(`targets: durable ingest >= ${TARGETS.ingest_events_per_s.sqlite} ev/s (sqlite), ${TARGETS.ingest_events_per_s.postgres} ev/s (postgres), page p95 <= ${TARGETS.filtered_page_p95_ms} ms, stats <= ${TARGETS.stats_ms} ms`)
  console.log(`machine: ${cpus().length} cpus, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}`)
  console.log(`wrote ${file}`)
}

await main()
