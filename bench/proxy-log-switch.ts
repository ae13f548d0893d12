// bench:proxy with the provable log on and off in one run (CORRAL_BENCH_LOG_OFF=1): `corral` is
// measured as serve would leave its database (the queue trigger in place) with an appender process
// draining that database every second beside it (serve runs the appender on a thread of its own
// process; here it is a process of its own, so its CPU is not in corral's column but its
// competition for the cores is in every latency), and `corral-log-off` is the same build on a copy
// of the store without the queue trigger and with no appender.
import { copyFileSync, existsSync } from 'node:fs'
import { join } from 'node:path'
import BetterSqlite3 from 'better-sqlite3'
import { dropLogQueueTriggers } from './audit-log-switch.js'
import { ROOT, spawnUntil } from './proxy-setup.js'

/** A copy of the seeded SQLite store with the log's queue trigger dropped. */
export async function logOffStore(dbUrl: string): Promise<string> {
  const file = dbUrl.slice('sqlite:'.length)
  const copy = `${file}.log-off.db`
  if (existsSync(copy)) return `sqlite:${copy}`
  copyFileSync(file, copy)
  const db = new BetterSqlite3(copy)
  try {
    await dropLogQueueTriggers('sqlite', async (text) => (text.startsWith('SELECT') ? db.prepare(text).all() as Array<Record<string, unknown>> : (db.exec(text), [])))
  } finally {
    db.close()
  }
  return `sqlite:${copy}`
}

/**
 * The appender as serve runs it, against `dbUrl`, in a child process (bench/audit-appender-proc.ts
 * running `root`'s sources: a baseline build's appender is its own code); CORRAL_BENCH_APPENDER_IDLE=1
 * runs it under SCHED_IDLE, to tell its CPU from its lock and I/O. `trace`: where it writes its
 * queue and CPU every 250 ms.
 */
export async function startAppender(dbUrl: string, root = ROOT, trace?: string): Promise<number> {
  // CORRAL_BENCH_APPENDER_PROF=dir: a --cpu-prof of the appender process (its thread's too) there.
  const prof = process.env.CORRAL_BENCH_APPENDER_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.CORRAL_BENCH_APPENDER_PROF] : []
  const args = [...prof, '--import', 'tsx', join(ROOT, 'bench/audit-appender-proc.ts'), dbUrl, trace ?? '', root]
  const p = process.env.CORRAL_BENCH_APPENDER_IDLE === '1'
    ? await spawnUntil('chrt', ['-i', '0', process.execPath, ...args], /READY/)
    : await spawnUntil(process.execPath, args, /READY/)
  return p.child.pid!
}
