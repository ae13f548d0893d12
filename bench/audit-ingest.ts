// Durable audit ingest (not a test): the journaled writer as `serve` runs it (openAuditWriter, the
// journal on, default batch and queue bounds) taking events as fast as it can keep them, on SQLite
// and PostgreSQL, for one or more builds side by side and with the provable log on or off, in one
// run. Each measurement is its own child process loading a checkout's dist/ (run `npm run build`
// there first), alternating builds and variants round by round.
//
//   node --import tsx bench/audit-ingest.ts                          # this checkout
//   node --import tsx bench/audit-ingest.ts . /tmp/base-checkout     # this checkout next to another
//   CORRAL_BENCH_EVENTS=200000 CORRAL_BENCH_ROUNDS=3 CORRAL_BENCH_VARIANTS=off,on node --import tsx bench/audit-ingest.ts
//
// Variants: `off` drops the provable log's queue trigger and runs no appender (a writer without the
// log); `trigger` keeps the trigger, no appender; `on` is serve: trigger and appender (every 1 s).
// Figures per run: events/s acknowledged (durable in the journal), events/s in the database (the
// clock stops when the last row is committed: the rate the writer sustains, since beyond it the
// queue bound refuses events), CPU per event of the whole process (every thread) and of its main
// thread, PostgreSQL backends' CPU per event (this run's connections), and with the appender the
// rows still queued for the log when the ingest ended and the time it took to catch up.
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { randomBytes } from 'node:crypto'
import { pathToFileURL } from 'node:url'
import { sql } from 'kysely'
import pg from 'pg'
import { dropLogQueueTriggers } from './audit-log-switch.js'

const N = Number(process.env.CORRAL_BENCH_EVENTS ?? 200_000)
const ROUNDS = Number(process.env.CORRAL_BENCH_ROUNDS ?? 2)
const VARIANTS = (process.env.CORRAL_BENCH_VARIANTS ?? 'off,on').split(',')
const DIALECTS = (process.env.CORRAL_BENCH_DIALECTS ?? 'sqlite,postgres').split(',')
const PG_URL = process.env.CORRAL_BENCH_PG_URL || process.env.CORRAL_TEST_PG_URL
/** Emits kept short of the writer's queue bound (20,000 events not yet in the database). */
const HEADROOM = 2_000
const QUEUE_BOUND = 20_000
const ORGS = ['org_a', 'org_b', 'org_c']
const DESTS = ['api.anthropic.com', 'api.openai.com', 'github.com', 'pypi.org', 'registry.npmjs.org']

/** A decision row like the proxy's, of fixed shape. */
const decision = (i: number) => ({
  org_id: ORGS[i % 3], user_id: 'usr_bench', event_type: 'policy_decision', category: 'audit', actor: 'policy-engine',
  workspace_id: `ws_${i % 50}`, agent_role: 'bench', agent_provider: 'anthropic', destination: DESTS[i % 5], method: 'POST',
  path: '/v1/messages', decision: 'allow', latency_ms: i % 500, transforms_applied: 3, validations_applied: 0, policy_type: 'http',
  phase: 'response_body', capability_name: 'llm', transforms_failed: {}, auth_used: ['anthropic-key'], auth_failures: {},
  debits: { requests: 1, tokens: i % 4000 }, budget_state: { requests: { used: i, max: 1_000_000_000 } }, floored: {},
})

/** CPU in ms of one thread (or process) from /proc, clock ticks of 10 ms. */
function procMs(path: string): number {
  try {
    const stat = readFileSync(path, 'utf8')
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(f[11]) + Number(f[12])) * 10
  } catch {
    return 0
  }
}

/** CPU in ms of every thread of this process, by thread id. */
function threadsMs(): Map<string, number> {
  const out = new Map<string, number>()
  for (const tid of readdirSync('/proc/self/task')) out.set(tid, procMs(`/proc/self/task/${tid}/stat`))
  return out
}

interface Result {
  ack_per_s: number
  db_per_s: number
  cpu_us: number
  main_us: number
  /** The busiest thread after the main one (on SQLite: the bulk insert worker). */
  next_us: number
  pg_us?: number
  queued_after?: number
  catch_up_ms?: number
}

type AuditModule = typeof import('../src/audit/index.js')
type StoreModule = typeof import('../src/store/index.js')

// long-function: one measurement from open to teardown, read top to bottom.
async function child(root: string, dialect: string, variant: string): Promise<Result> {
  const dist = (p: string) => pathToFileURL(join(root, 'dist', p)).href
  const { openAuditWriter, ProvableLog } = (await import(dist('audit/index.js'))) as AuditModule
  const { openStore } = (await import(dist('store/index.js'))) as StoreModule
  const dir = mkdtempSync(join(tmpdir(), 'corral-bench-ingest-'))
  const schema = `bench_${randomBytes(4).toString('hex')}`
  const app = `corral-bench-${randomBytes(4).toString('hex')}`
  process.env.PGAPPNAME = app
  const url = dialect === 'sqlite' ? `sqlite:${join(dir, 'corral.db')}` : PG_URL!
  const store = dialect === 'sqlite' ? await openStore(url) : await openStore(url, { schema })
  const q = (text: string) => sql.raw<Record<string, unknown>>(text).execute(store.db as never)
  try {
    if (variant === 'off') await dropLogQueueTriggers(dialect, async (text) => (await q(text)).rows)
    const logger = { error: (o: object, m: string) => console.error(m, o), warn: () => {} }
    const writer = await openAuditWriter(store, { journalDir: join(dir, 'journal'), logger })
    // As serve runs it: on a worker thread with its own connection, yielding to the writer's
    // backlog (a build without those options ignores them; one without backlogged() never yields).
    const busy = (writer as { backlogged?: () => boolean }).backlogged?.bind(writer)
    const log = variant === 'on' ? new ProvableLog({ store, logger, thread: { url, ...(dialect === 'postgres' ? { schema } : {}) }, ...(busy ? { writerBusy: busy } : {}) } as never) : undefined
    log?.start()
    await writer.emit(decision(0) as never) // spawns the SQLite worker, opens the segment and the pool
    await writer.flush()
    const pgPids = async () => dialect === 'postgres'
      ? (await q(`SELECT pid FROM pg_stat_activity WHERE application_name = '${app}'`)).rows.map((r) => Number((r as { pid: number }).pid))
      : []
    const pgMs = async () => (await pgPids()).reduce((s, pid) => s + procMs(`/proc/${pid}/stat`), 0)
    const pg0 = await pgMs()
    const cpu0 = process.cpuUsage()
    const threads0 = threadsMs()
    const start = performance.now()
    let acked = 0
    let failed = 0
    let ackedAt = 0
    const onAck = () => {
      if (++acked === N) ackedAt = performance.now()
    }
    const onFail = (err: unknown) => {
      if (failed++ === 0) console.error('emit refused:', String(err))
    }
    for (let i = 1; i <= N; i++) {
      writer.emit(decision(i) as never).then(onAck, onFail)
      // Closed loop against the queue bound: beyond it the writer refuses (the proxy would deny).
      if ((i & 255) === 0) while (writer.stats().pending >= QUEUE_BOUND - HEADROOM) await new Promise((r) => setTimeout(r, 1))
    }
    await writer.flush()
    const end = performance.now()
    const cpu = process.cpuUsage(cpu0)
    const used = [...threadsMs()].map(([tid, ms]) => [tid, ms - (threads0.get(tid) ?? 0)] as const)
    const mainMs = used.find(([tid]) => tid === String(process.pid))?.[1] ?? 0
    const nextMs = Math.max(0, ...used.filter(([tid]) => tid !== String(process.pid)).map(([, ms]) => ms))
    const pgUsed = (await pgMs()) - pg0
    if (failed > 0) throw new Error(`${failed} emits refused`)
    const out: Result = {
      ack_per_s: Math.round(N / ((ackedAt - start) / 1000)),
      db_per_s: Math.round(N / ((end - start) / 1000)),
      cpu_us: Math.round(((cpu.user + cpu.system) / N) * 10) / 10,
      main_us: Math.round(((mainMs * 1000) / N) * 10) / 10,
      next_us: Math.round(((nextMs * 1000) / N) * 10) / 10,
      ...(dialect === 'postgres' ? { pg_us: Math.round(((pgUsed * 1000) / N) * 10) / 10 } : {}),
    }
    if (log) {
      out.queued_after = Number((await q('SELECT count(*) AS n FROM audit_log_pending')).rows[0].n)
      const t = performance.now()
      await log.append()
      out.catch_up_ms = Math.round(performance.now() - t)
      await log.stop()
      let size = 0
      for (const org of ORGS) size += (await store.auditLog.tree(org))?.size ?? 0
      if (size !== N + 1) throw new Error(`the trees hold ${size} of ${N + 1} rows`)
    }
    await writer.close()
    return out
  } finally {
    await store.close()
    if (dialect === 'postgres') {
      const c = new pg.Client({ connectionString: PG_URL })
      await c.connect()
      await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
      await c.end()
    }
    rmSync(dir, { recursive: true, force: true })
  }
}

const load = () => loadavg().map((l) => l.toFixed(1)).join(' ')

if (process.env.CORRAL_BENCH_CHILD) {
  const [root, dialect, variant] = JSON.parse(process.env.CORRAL_BENCH_CHILD) as [string, string, string]
  process.stdout.write(JSON.stringify(await child(root, dialect, variant)) + '\n')
} else {
  const roots = (process.argv.length > 2 ? process.argv.slice(2) : ['.']).map((r) => resolve(r))
  const dialects = DIALECTS.filter((d) => d === 'sqlite' || PG_URL)
  const cmd = `node --import tsx bench/audit-ingest.ts ${process.argv.slice(2).join(' ')}`.trim()
  process.stdout.write(`durable audit ingest (journal on), ${N.toLocaleString()} events, ${ROUNDS} rounds, variants ${VARIANTS.join(',')}; load average ${load()}\n`)
  const runs: Array<Result & { root: string; dialect: string; variant: string; round: number; loadavg: number[] }> = []
  for (let round = 0; round < ROUNDS; round++) {
    for (const dialect of dialects) {
      for (const variant of VARIANTS) {
        // Builds alternate which runs first round by round: neither always has the warmer machine.
        for (const root of round % 2 === 0 ? roots : [...roots].reverse()) {
          const out = execFileSync(process.execPath, ['--import', 'tsx', import.meta.filename], {
            env: { ...process.env, CORRAL_BENCH_CHILD: JSON.stringify([root, dialect, variant]) },
            stdio: ['ignore', 'pipe', 'inherit'],
            maxBuffer: 1 << 20,
          }).toString().trim().split('\n').pop()!
          const r = JSON.parse(out) as Result
          runs.push({ ...r, root, dialect, variant, round, loadavg: loadavg() })
          const extra = r.queued_after === undefined ? '' : `  queued after ${r.queued_after}, caught up in ${r.catch_up_ms} ms`
          const pgCpu = r.pg_us === undefined ? '' : `  pg ${r.pg_us} us/ev`
          process.stdout.write(`${dialect.padEnd(8)} ${variant.padEnd(7)} ${root.padEnd(34)} ack ${String(r.ack_per_s).padStart(7)}/s  db ${String(r.db_per_s).padStart(7)}/s  cpu ${r.cpu_us} us/ev (main ${r.main_us}, next thread ${r.next_us})${pgCpu}${extra}  [load ${load()}]\n`)
        }
      }
    }
  }
  const file = resolve(import.meta.dirname, 'results/audit-ingest.json')
  mkdirSync(resolve(import.meta.dirname, 'results'), { recursive: true })
  writeFileSync(file, JSON.stringify({ at: new Date().toISOString(), command: cmd, node: process.version, cpus: cpus().length, events: N, loadavg_end: loadavg(), runs }, null, 2) + '\n')
  process.stdout.write(`wrote ${file}\n`)
}
