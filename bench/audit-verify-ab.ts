// Before/after for `audit verify` (not a test): the same four verifications (SQLite and PostgreSQL,
// from the database and from the export) from one checkout's sources, over the rows that
// `CORRAL_BENCH_KEEP=DIR npm run bench:audit-verify` left in DIR. Run it for a baseline checkout
// and this one alternately, in one session:
//
//   node --import tsx bench/audit-verify-ab.ts <checkout root> <keep dir> [postgres url]
//
// Prints one JSON line per verification: wall clock, CPU of the process (every thread), the CPU the
// PostgreSQL server's backends used meanwhile (`server_cpu_ms`, read from /proc: every postgres
// process on the machine, so only meaningful when nothing else uses the server), load average.
// CORRAL_BENCH_ONLY=postgres (or sqlite) runs one dialect's two verifications.
import { loadavg } from 'node:os'
import { readdirSync, readFileSync } from 'node:fs'
const root = process.argv[2]
const keep = process.argv[3] ?? '/tmp/verify-keep'
const { bundleInput, databaseInput, verifyLog } = await import(`${root}/src/audit/index.ts`)
const { openStore } = await import(`${root}/src/store/index.ts`)
const pgUrl = process.argv[4] ?? process.env.CORRAL_TEST_PG_URL ?? 'postgres://postgres:postgres@127.0.0.1:5432/corral_dev'
const schema = readFileSync(`${keep}/pg-schema`, 'utf8').trim()
const out: Record<string, unknown>[] = []
/** CPU time (ms) of every postgres process now (Linux; 0 elsewhere). */
function serverCpu(): number {
  let ticks = 0
  try {
    for (const pid of readdirSync('/proc')) {
      if (!/^\d+$/.test(pid)) continue
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
        if (!stat.includes('(postgres)')) continue
        const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
        // utime, stime, and the reaped children's (backends that have exited count in the postmaster's).
        ticks += Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])
      } catch {}
    }
  } catch {}
  return ticks * 10
}
async function time(name: string, f: () => Promise<{ ok: boolean; tree_size: number }>) {
  const load = loadavg()[0]; const c = process.cpuUsage(); const s = serverCpu(); const t = performance.now()
  const r = await f(); const u = process.cpuUsage(c)
  const row = { root, name, ok: r.ok, rows: r.tree_size, wall_ms: Math.round(performance.now() - t), cpu_ms: Math.round((u.user + u.system) / 1000), server_cpu_ms: serverCpu() - s, load1: load }
  out.push(row); console.log(JSON.stringify(row))
}
const only = process.env.CORRAL_BENCH_ONLY
for (const [tag, url, opts, witness, exp] of [['sqlite', `sqlite:${keep}/bench.db`, {}, `${keep}/witness`, `${keep}/export-sqlite`], ['postgres', pgUrl, { schema }, `${keep}/pg/witness`, `${keep}/pg/export-postgres`]] as const) {
  if (only && only !== tag) continue
  const store = await openStore(url, opts)
  await time(`${tag} database`, async () => verifyLog(await databaseInput(store, 'org_bench', { witness }, { thread: { url, ...opts } })))
  await store.close()
  await time(`${tag} export`, async () => verifyLog(await bundleInput(exp, {})))
}
