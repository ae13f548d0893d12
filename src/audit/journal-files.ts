// The journal's files: who owns a writer directory (its LOCK), removing one, making a directory
// entry durable, and the journal's settings read from the environment (src/audit/journal.ts).
import { hostname } from 'node:os'
import { open, readFile, rm, rmdir } from 'node:fs/promises'
import { join } from 'node:path'
import { processGone } from '../proc/index.js'

/** What an acknowledged journal write survives: a crash of this process, or of the whole host. */
export type JournalDurability = 'process' | 'host'
/** The file naming a writer directory's owner (pid, host, start time). */
export const LOCK = 'LOCK'

export async function isStale(dir: string): Promise<boolean> {
  let owner: { pid?: unknown; host?: unknown; start?: unknown }
  try {
    owner = JSON.parse(await readFile(join(dir, LOCK), 'utf8'))
  } catch {
    return true // closed cleanly with segments left, or never finished creating
  }
  if (owner.host !== hostname() || typeof owner.pid !== 'number') return false
  if (owner.pid === process.pid) return true
  // Gone, a zombie, or the pid reused since (src/proc): none of them will write this journal again.
  return processGone(owner.pid, typeof owner.start === 'number' ? owner.start : undefined)
}

export async function removeDir(dir: string): Promise<void> {
  await rm(join(dir, LOCK), { force: true }).catch(() => {})
  await rmdir(dir).catch(() => {})
}

/** Makes a created or renamed directory entry durable. */
export async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r').catch(() => undefined)
  await fh?.sync().catch(() => {})
  await fh?.close().catch(() => {})
}

export function safeHost(): string {
  return hostname().replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 64) || 'host'
}

/**
 * CORRAL_AUDIT_DURABILITY (`process` | `host`) and CORRAL_AUDIT_SYNC_INTERVAL_MS (1..10000), read
 * once at start; a bad value stops the start with a message naming the variable.
 */
export function journalSettingsFromEnv(env: NodeJS.ProcessEnv): { journalDurability: JournalDurability; journalSyncIntervalMs: number } {
  const d = env.CORRAL_AUDIT_DURABILITY ?? 'process'
  if (d !== 'process' && d !== 'host') throw new Error(`CORRAL_AUDIT_DURABILITY must be "process" or "host", got ${JSON.stringify(d)}`)
  const raw = env.CORRAL_AUDIT_SYNC_INTERVAL_MS ?? '100'
  const ms = Number(raw)
  if (!/^\d+$/.test(raw) || ms < 1 || ms > 10_000) throw new Error(`CORRAL_AUDIT_SYNC_INTERVAL_MS must be an integer from 1 to 10000 (milliseconds), got ${JSON.stringify(raw)}`)
  return { journalDurability: d, journalSyncIntervalMs: ms }
}
