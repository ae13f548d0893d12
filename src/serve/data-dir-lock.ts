// One `serve` per data dir (docs/reliability.md "One serve per data dir"). Two processes on one
// data dir would share the audit journal, the SQLite file, the workspace roots and the CA; the
// second refuses to start and says which process holds the dir. The lock is a file,
// `<data dir>/serve.lock`, created atomically (written beside it, then hard-linked into place:
// `link` fails when the name exists, and the content is complete from the first instant). It
// names the holder: pid, host, the pid's start time (so a reused pid after a kill -9 is told apart)
// and when it was taken. A lock whose holder is gone on this host is stale and taken over; a lock
// of another host is never guessed about (its holder cannot be checked from here).
import { link, readFile, rename, rm, writeFile } from 'node:fs/promises'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { ownStartTicks, processGone } from '../proc/index.js'

export const LOCK_FILE = 'serve.lock'

interface Holder {
  pid: number
  host: string
  /** The process's start time in clock ticks since boot (Linux /proc), when known. */
  started?: number
  at: string
}

/** A second start on a held data dir: the one line the CLI prints. */
export class DataDirLocked extends Error {
  readonly code = 'CORRAL_DATA_DIR_LOCKED'
  constructor(dataDir: string, holder: Holder) {
    const who = holder.host === hostname() ? `pid ${holder.pid}` : `pid ${holder.pid} on host ${holder.host}`
    const other = holder.host === hostname()
      ? 'stop it first, or pass another --data-dir'
      : `stop it first, or pass another --data-dir; if that process is gone, delete ${join(dataDir, LOCK_FILE)}`
    super(`the data dir ${dataDir} is in use by another corral serve or dev (${who}, since ${holder.at}): ${other}`)
    this.name = 'DataDirLocked'
  }
}

/** Whether the recorded holder is still the process that took the lock. */
function holds(h: Holder): boolean {
  if (h.host !== hostname()) return true // cannot be checked from here: assume it runs
  if (h.pid === process.pid) return false // our own pid: a previous life of a container's pid 1
  // Gone, a zombie (exited, never to release it), or the pid reused since (src/proc).
  return !processGone(h.pid, h.started)
}

function parse(text: string): Holder | undefined {
  try {
    const h = JSON.parse(text) as Partial<Holder>
    if (typeof h.pid === 'number' && Number.isInteger(h.pid) && h.pid > 0 && typeof h.host === 'string') {
      return { pid: h.pid, host: h.host, at: typeof h.at === 'string' ? h.at : 'an unknown time', ...(typeof h.started === 'number' ? { started: h.started } : {}) }
    }
  } catch {
    // unreadable: a lock written by something else; treated as stale below
  }
  return undefined
}

/**
 * Takes the data dir's lock or throws DataDirLocked; returns its release (removes the file if it is
 * still ours). Bounded: a lock that keeps changing under us after a few takeovers is reported held.
 */
export async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  const path = join(dataDir, LOCK_FILE)
  const started = ownStartTicks()
  const mine: Holder = { pid: process.pid, host: hostname(), at: new Date().toISOString(), ...(started !== undefined ? { started } : {}) }
  const text = JSON.stringify(mine)
  const tmp = `${path}.${process.pid}.tmp`
  await writeFile(tmp, text, { mode: 0o600 })
  try {
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        await link(tmp, path)
        return release(path, text)
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
      }
      const seen = await readFile(path, 'utf8').catch(() => undefined)
      if (seen === undefined) continue // released between our link and our read
      const holder = parse(seen)
      if (holder && holds(holder)) throw new DataDirLocked(dataDir, holder)
      await takeOver(path, seen)
    }
    const last = parse(await readFile(path, 'utf8').catch(() => '')) ?? { pid: 0, host: hostname(), at: 'an unknown time' }
    throw new DataDirLocked(dataDir, last)
  } finally {
    await rm(tmp, { force: true })
  }
}

/**
 * Moves a stale lock aside, but only the one we judged: if another starter replaced it in the
 * meantime, its lock is put back (link fails if a third one is already in place; then that one stands).
 */
async function takeOver(path: string, judged: string): Promise<void> {
  const aside = `${path}.stale.${process.pid}`
  try {
    await rename(path, aside)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return
    throw err
  }
  const moved = await readFile(aside, 'utf8').catch(() => judged)
  if (moved !== judged) await link(aside, path).catch(() => {})
  await rm(aside, { force: true })
}

function release(path: string, text: string): () => Promise<void> {
  return async () => {
    const now = await readFile(path, 'utf8').catch(() => undefined)
    if (now === text) await rm(path, { force: true })
  }
}
