// Provable log verification benchmark (not a test): 1,000,000 rows of one org in an export
// directory (the offline path an auditor runs), verified against a signed checkpoint and its public
// key: every row re-encoded and hashed, the tree rebuilt, the checkpoint's signature and root
// checked. Also the same log verified straight from the database (SQLite). Target: the export
// verifies in at most 10 s. Writes bench/results/audit-verify.json.
//
//   npm run bench:audit-verify                  # 1,000,000 rows
//   CORRAL_BENCH_EVENTS=100000 npm run bench:audit-verify

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { bundleInput, createAuditWriter, databaseInput, LogSigner, ProvableLog, verifyLog, WitnessDir, writeBundle } from '../src/audit/index.js'
import type { NewAuditEvent } from '../src/contract/index.js'
import { openStore } from '../src/store/index.js'

const N = Number(process.env.CORRAL_BENCH_EVENTS ?? 1_000_000)
const ORG = 'org_bench'
const TARGET_MS = 10_000

function event(i: number): NewAuditEvent {
  return {
    org_id: ORG, user_id: i % 4 ? 'usr_a' : 'system', event_type: 'policy_decision', category: 'audit', actor: 'policy-engine',
    workspace_id: `ws_${i % 50}`, destination: 'api.anthropic.com', method: 'POST', path: '/v1/messages', policy_type: 'http',
    decision: i % 20 ? 'allow' : 'deny', ...(i % 20 ? {} : { reason: 'no_match' as const }), phase: 'response_body', latency_ms: i % 500,
    debits: { tokens: i % 1000 }, budget_state: { tokens: { used: i, max: 1e9 } },
  }
}

async function timed<T>(fn: () => Promise<T>): Promise<[number, T]> {
  const t = performance.now()
  const r = await fn()
  return [performance.now() - t, r]
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'corral-bench-verify-'))
  try {
    const store = await openStore(`sqlite:${join(dir, 'bench.db')}`)
    process.stderr.write(`writing ${N.toLocaleString()} rows…\n`)
    const writer = createAuditWriter(store, { batchSize: 2_000, maxQueue: 20_000 })
    const inflight = new Set<Promise<unknown>>()
    for (let i = 0; i < N; i++) {
      const p: Promise<unknown> = writer.emit(event(i)).finally(() => inflight.delete(p))
      inflight.add(p)
      if (inflight.size >= 5_000) await Promise.race(inflight)
    }
    await Promise.all(inflight)
    await writer.close()
    const witness = join(dir, 'witness')
    const log = new ProvableLog({ store, logger: { error: (o: object, m: string) => console.error(m, o) }, signer: await LogSigner.open(join(dir, 'data')), witness: new WitnessDir(witness) })
    const [appendMs] = await timed(() => log.checkpoint())
    process.stderr.write(`appended and checkpointed in ${Math.round(appendMs)} ms; exporting…\n`)
    const out = join(dir, 'export')
    const [exportMs] = await timed(() => writeBundle(store, ORG, out))
    process.stderr.write(`exported in ${Math.round(exportMs)} ms; verifying…\n`)
    const [dbMs, dbReport] = await timed(async () => verifyLog(await databaseInput(store, ORG, { witness })))
    await store.close()
    const [offlineMs, offline] = await timed(async () => verifyLog(await bundleInput(out, { witness })))
    if (!offline.ok || !dbReport.ok || offline.tree_size !== N) throw new Error(`verification failed: ${JSON.stringify(offline.findings.slice(0, 3))}`)
    const result = {
      at: new Date().toISOString(), node: process.version, cpus: cpus().length, loadavg: loadavg(), rows: N, target_ms: TARGET_MS,
      append_and_checkpoint_ms: Math.round(appendMs), export_ms: Math.round(exportMs),
      verify_export_ms: Math.round(offlineMs), verify_database_ms: Math.round(dbMs),
    }
    mkdirSync(resolve(import.meta.dirname, 'results'), { recursive: true })
    writeFileSync(resolve(import.meta.dirname, 'results/audit-verify.json'), `${JSON.stringify(result, null, 2)}\n`)
    console.table([{ rows: N, 'verify export ms': result.verify_export_ms, 'verify db ms': result.verify_database_ms, 'append+checkpoint ms': result.append_and_checkpoint_ms, 'export ms': result.export_ms }])
    console.log(`target: an export of ${N.toLocaleString()} rows verifies in <= ${TARGET_MS} ms`)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

await main()
