// Provable log verification benchmark (not a test): 1,000,000 rows of one org, written by the
// audit writer, appended and checkpointed, then verified against the signed checkpoint and the
// witness's public key: every row re-encoded from its content and hashed, the tree rebuilt, the
// checkpoint's signature and root checked. Two paths: from an export directory (the offline path
// an auditor runs) and straight from the database. SQLite, and PostgreSQL when CORRAL_BENCH_PG_URL
// or CORRAL_TEST_PG_URL is set (CORRAL_BENCH_SKIP_PG=1 skips it). Target: 1M rows verify in at most
// 10 s (wall clock). Times are wall clock and CPU of this process (every thread: the verification
// threads included), with the load average taken before each. Writes bench/results/audit-verify.json
// (CORRAL_BENCH_OUT names another file under bench/).
//
//   npm run bench:audit-verify                  # 1,000,000 rows
//   CORRAL_BENCH_EVENTS=100000 npm run bench:audit-verify
//   CORRAL_BENCH_KEEP=/tmp/dir …                # keep (and on the next run reuse) the SQLite database and the PostgreSQL schema

import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { bundleInput, createAuditWriter, databaseInput, LogSigner, ProvableLog, verifyLog, WitnessDir, writeBundle } from '../src/audit/index.js'
import type { NewAuditEvent } from '../src/contract/index.js'
import { openStore, type Store } from '../src/store/index.js'

const N = Number(process.env.CORRAL_BENCH_EVENTS ?? 1_000_000)
const ORG = 'org_bench'
const TARGET_MS = 10_000
const KEEP = process.env.CORRAL_BENCH_KEEP

function event(i: number): NewAuditEvent {
  return {
    org_id: ORG, user_id: i % 4 ? 'usr_a' : 'system', event_type: 'policy_decision', category: 'audit', actor: 'policy-engine',
    workspace_id: `ws_${i % 50}`, destination: 'api.anthropic.com', method: 'POST', path: '/v1/messages', policy_type: 'http',
    decision: i % 20 ? 'allow' : 'deny', ...(i % 20 ? {} : { reason: 'no_match' as const }), phase: 'response_body', latency_ms: i % 500,
    debits: { tokens: i % 1000 }, budget_state: { tokens: { used: i, max: 1e9 } },
  }
}

/**
 * Wall-clock and CPU time (this process, all threads) of `fn`. On a machine shared with other
 * sessions the wall clock depends on the neighbours; the CPU time is what the work costs.
 */
async function timed<T>(fn: () => Promise<T>): Promise<[number, T, number]> {
  const t = performance.now()
  const cpu = process.cpuUsage()
  const r = await fn()
  const used = process.cpuUsage(cpu)
  return [performance.now() - t, r, (used.user + used.system) / 1000]
}

/** Writes rows until the org has N, appends and checkpoints them; returns how long that took (0 when reused). */
async function prepare(store: Store, thread: { url: string; schema?: string }, dir: string, tag: string): Promise<number> {
  const have = await store.auditLog.countRows(ORG)
  const t = performance.now()
  if (have < N) {
    process.stderr.write(`[${tag}] writing ${(N - have).toLocaleString()} rows…\n`)
    const writer = createAuditWriter(store, { batchSize: 2_000, maxQueue: 20_000, durableTimeoutMs: 600_000 })
    const inflight = new Set<Promise<unknown>>()
    for (let i = have; i < N; i++) {
      const p: Promise<unknown> = writer.emit(event(i)).finally(() => inflight.delete(p))
      inflight.add(p)
      if (inflight.size >= 5_000) await Promise.race(inflight)
    }
    await Promise.all(inflight)
    await writer.close()
  }
  const log = new ProvableLog({ store, logger: { error: (o: object, m: string) => console.error(m, o) }, signer: await LogSigner.open(join(dir, 'data')), witness: new WitnessDir(join(dir, 'witness')), thread })
  await log.checkpoint()
  await log.stop()
  return have < N ? performance.now() - t : 0
}

async function measure(store: Store, thread: { url: string; schema?: string }, dir: string, tag: string) {
  const prepMs = await prepare(store, thread, dir, tag)
  const witness = join(dir, 'witness')
  const out = join(dir, `export-${tag}`)
  // Kept from an earlier run of the same rows (CORRAL_BENCH_KEEP): the export is reused, not timed again.
  const reuse = KEEP !== undefined && prepMs === 0 && existsSync(join(out, 'manifest.json'))
  if (!reuse) rmSync(out, { recursive: true, force: true })
  process.stderr.write(`[${tag}] ${reuse ? 'reusing the export' : 'exporting'}…\n`)
  const [exportMs, , exportCpu] = reuse ? [Number.NaN, undefined, Number.NaN] : await timed(() => writeBundle(store, ORG, out))
  const vkey = readFileSync(join(witness, 'keys', `${(await store.auditLog.keys())[0].name}.vkey`), 'utf8')
  process.stderr.write(`[${tag}] verifying from the database…\n`)
  if (!reuse) process.stderr.write(`[${tag}] exported in ${Math.round(exportMs)} ms (${Math.round(exportCpu)} ms CPU)\n`)
  const dbLoad = loadavg()
  // As `corral audit verify --org` runs it: the rows read and checked on threads with connections of their own.
  const [dbMs, dbReport, dbCpu] = await timed(async () => verifyLog(await databaseInput(store, ORG, { witness }, { thread })))
  process.stderr.write(`[${tag}] verified from the database in ${Math.round(dbMs)} ms (${Math.round(dbCpu)} ms CPU); verifying the export…\n`)
  const exportLoad = loadavg()
  const [offlineMs, offline, offlineCpu] = await timed(async () => verifyLog(await bundleInput(out, { keys: [vkey] })))
  process.stderr.write(`[${tag}] verified the export in ${Math.round(offlineMs)} ms (${Math.round(offlineCpu)} ms CPU)\n`)
  for (const r of [dbReport, offline]) {
    if (!r.ok || r.tree_size !== N) throw new Error(`verification failed: ${r.tree_size} rows, ${JSON.stringify(r.findings.slice(0, 3))}`)
  }
  if (!KEEP) rmSync(out, { recursive: true, force: true })
  return {
    dialect: tag, rows: N, loadavg_before: dbLoad, threads: availableParallelism(),
    verify_export_ms: Math.round(offlineMs), verify_export_cpu_ms: Math.round(offlineCpu), verify_export_loadavg: exportLoad,
    verify_database_ms: Math.round(dbMs), verify_database_cpu_ms: Math.round(dbCpu), verify_database_loadavg: dbLoad,
    ...(reuse ? {} : { export_ms: Math.round(exportMs), export_cpu_ms: Math.round(exportCpu) }),
    write_append_checkpoint_ms: Math.round(prepMs),
  }
}

async function main() {
  const dir = KEEP ?? mkdtempSync(join(tmpdir(), 'corral-bench-verify-'))
  mkdirSync(dir, { recursive: true })
  const results = []
  try {
    const url = `sqlite:${join(dir, 'bench.db')}`
    const store = await openStore(url)
    try {
      results.push(await measure(store, { url }, dir, 'sqlite'))
    } finally {
      await store.close()
    }
    const pgUrl = process.env.CORRAL_BENCH_PG_URL || process.env.CORRAL_TEST_PG_URL
    if (pgUrl && process.env.CORRAL_BENCH_SKIP_PG !== '1') {
      const schemaFile = join(dir, 'pg-schema')
      const schema = KEEP && existsSync(schemaFile) ? readFileSync(schemaFile, 'utf8').trim() : `bench_${randomBytes(4).toString('hex')}`
      if (KEEP) writeFileSync(schemaFile, schema)
      const pgStore = await openStore(pgUrl, { schema })
      try {
        results.push(await measure(pgStore, { url: pgUrl, schema }, join(dir, 'pg'), 'postgres'))
      } finally {
        await pgStore.close()
        if (!KEEP) {
          const c = new pg.Client({ connectionString: pgUrl })
          await c.connect()
          await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
          await c.end()
        }
      }
    }
  } finally {
    if (!KEEP) rmSync(dir, { recursive: true, force: true })
  }
  const result = { at: new Date().toISOString(), node: process.version, cpus: cpus().length, loadavg: loadavg(), rows: N, target_ms: TARGET_MS, results }
  mkdirSync(resolve(import.meta.dirname, 'results'), { recursive: true })
  writeFileSync(resolve(import.meta.dirname, process.env.CORRAL_BENCH_OUT ?? 'results/audit-verify.json'), `${JSON.stringify(result, null, 2)}\n`)
  console.table(results.map(({ loadavg_before, verify_export_loadavg, verify_database_loadavg, ...r }) => ({ ...r, load: loadavg_before.map((l) => l.toFixed(1)).join(' ') })))
  console.log(`target: ${N.toLocaleString()} rows verify in <= ${TARGET_MS} ms; load average now ${loadavg().map((l) => l.toFixed(1)).join(' ')}`)
}

await main()
