// The audit journal: a local append-only file of events that makes an event durable before the
// database has it, so an answer can leave without waiting for a (possibly restarting) database
// and a kill -9 loses no answered row.
//
// Layout: <root>/<host>-<pid>-<random>/ holds one writer's segments `000000000001.jsonl`, … (one
// event per line, the encoder's line) and a LOCK naming the owner. Lines are group-committed by
// the writer (src/audit/writer.ts): one write() per group. Two durabilities (docs/reliability.md
// "Journal durability"):
// - `process` (the default): the group is written synchronously on the event loop into the page
//   cache, so the bytes belong to the kernel before the answer leaves and a crash of the process
//   (kill -9, OOM) loses nothing; a background fdatasync every `syncIntervalMs` bounds what a
//   crash of the host can lose. No threadpool round trip and no disk latency on the answer.
// - `host`: the write goes to a file opened with O_DSYNC on libuv's threadpool and returns once
//   the data is on disk (fdatasync after the write where O_DSYNC does not exist). A segment is sealed when it grows
// past `segmentBytes`, or past 1 MiB once every line in it is in the database; a sealed segment
// whose lines are all in the database is deleted. At open, directories of writers that are gone (same host,
// pid not alive — gone, a zombie, or reused by another process since — or our own pid from a
// previous life in a container) are handed back for replay.

import { randomBytes } from 'node:crypto'
import { hostname } from 'node:os'
import { constants, writeSync } from 'node:fs'
import { mkdir, open, readFile, readdir, rename, rm, rmdir, unlink, writeFile, type FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import { ownStartTicks, processGone } from '../proc/index.js'

export interface Segment {
  readonly path: string
  bytes: number
  /** Lines written to this segment whose events are not yet in the database. */
  outstanding: number
  sealed: boolean
  fh?: FileHandle
}

/** A segment of a writer that is gone: its lines are replayed, then it is discarded. */
export interface RecoveredSegment {
  readonly dir: string
  readonly path: string
  readonly lines: string[]
  /** The last line had no newline: a write cut short by the crash (never acknowledged). */
  readonly tornTail: boolean
}

const LOCK = 'LOCK'
/** Characters written per group at most (the writer bounds its groups with it). */
export const MAX_GROUP_CHARS = 1 << 20
// Append; with `host` durability each write is on disk before it returns (data and the size needed to read it back).
const DSYNC = constants.O_DSYNC as number | undefined
const APPEND_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_APPEND

/** What an acknowledged journal write survives: a crash of this process, or of the whole host. */
export type JournalDurability = 'process' | 'host'

export interface JournalOptions {
  /** Segment size before rotation (default 8 MiB). */
  segmentBytes?: number
  /** Default `process`. */
  durability?: JournalDurability
  /** With `process`: how often written data is flushed to disk in the background (default 100 ms). */
  syncIntervalMs?: number
}

export class Journal {
  readonly dir: string
  readonly #segmentBytes: number
  #seq = 0
  #active: Segment | undefined
  #writing: Promise<Segment> | undefined
  #segments = new Set<Segment>()
  #closed = false
  readonly #durability: JournalDurability
  readonly #flags: number
  /** `process` durability: segments written since their last background fdatasync. */
  readonly #dirty = new Set<Segment>()
  #syncTimer: NodeJS.Timeout | undefined
  #syncing: Promise<void> | undefined

  private constructor(dir: string, opts: JournalOptions) {
    this.dir = dir
    this.#segmentBytes = opts.segmentBytes ?? 8 << 20
    this.#durability = opts.durability ?? 'process'
    this.#flags = APPEND_FLAGS | (this.#durability === 'host' ? (DSYNC ?? 0) : 0)
    if (this.#durability === 'process') {
      this.#syncTimer = setInterval(() => void this.#syncDirty(), Math.max(1, opts.syncIntervalMs ?? 100))
      this.#syncTimer.unref()
    }
  }

  get durability(): JournalDurability {
    return this.#durability
  }

  /** Claims a fresh directory under `root` and returns the segments left by writers that are gone. */
  static async open(root: string, opts: JournalOptions = {}): Promise<{ journal: Journal; recovered: RecoveredSegment[] }> {
    await mkdir(root, { recursive: true, mode: 0o700 })
    const recovered: RecoveredSegment[] = []
    for (const name of (await readdir(root)).sort()) {
      if (name.startsWith('.')) continue
      const dir = join(root, name)
      if (!(await isStale(dir))) continue
      for (const file of (await readdir(dir).catch(() => [] as string[])).filter((f) => f.endsWith('.jsonl')).sort()) {
        const path = join(dir, file)
        const text = await readFile(path, 'utf8')
        const tornTail = text.length > 0 && !text.endsWith('\n')
        const lines = text.split('\n')
        lines.pop() // the text after the last newline: empty, or the torn tail
        recovered.push({ dir, path, lines: lines.filter((l) => l !== ''), tornTail })
      }
      if (!recovered.some((r) => r.dir === dir)) await removeDir(dir)
    }
    // Created under a dot name and renamed, so no other process ever sees it without its LOCK.
    const name = `${safeHost()}-${process.pid}-${randomBytes(4).toString('hex')}`
    const tmp = join(root, `.${name}`)
    await mkdir(tmp, { mode: 0o700 })
    const start = ownStartTicks()
    await writeFile(join(tmp, LOCK), JSON.stringify({ pid: process.pid, host: hostname(), started: new Date().toISOString(), ...(start !== undefined ? { start } : {}) }))
    await rename(tmp, join(root, name))
    await syncDir(root)
    return { journal: new Journal(join(root, name), opts), recovered }
  }

  /**
   * Writes `text` (`lines` whole lines, each ending in a newline) as one group; resolves with its
   * segment once it is on disk. One group at a time: the writer gathers the next while this one is
   * written (group commit).
   */
  write(text: string, lines: number): Promise<Segment> {
    if (this.#closed) return Promise.reject(new Error('audit journal is closed'))
    if (this.#writing) return Promise.reject(new Error('audit journal: one group at a time'))
    const p = this.#write(text, lines)
    this.#writing = p
    const clear = () => {
      if (this.#writing === p) this.#writing = undefined
    }
    p.then(clear, clear)
    return p
  }

  async #write(text: string, lines: number): Promise<Segment> {
    const seg = this.#reusable() ?? (await this.#rotate())
    const buf = Buffer.from(text, 'utf8')
    try {
      let off = 0
      if (this.#durability === 'process') {
        // Synchronous on purpose: a page-cache write costs a syscall, a threadpool round trip costs
        // two thread wakeups and delays the answer by a turn; the kernel owns the bytes on return.
        const fd = seg.fh!.fd
        while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off)
        this.#dirty.add(seg)
      } else {
        while (off < buf.length) off += (await seg.fh!.write(buf, off, buf.length - off)).bytesWritten
        if (DSYNC === undefined) await seg.fh!.datasync()
      }
    } catch (err) {
      // A half-written group must not sit in front of the next one: start a new segment.
      await this.#seal(seg)
      throw err
    }
    seg.bytes += buf.length
    seg.outstanding += lines
    return seg
  }

  /** The events of `n` lines of `seg` are in the database. */
  release(seg: Segment, n = 1): void {
    seg.outstanding -= n
    if (seg.sealed && seg.outstanding <= 0) void this.#delete(seg)
  }

  /** Bytes in live segments and their count. */
  stats(): { segments: number; bytes: number } {
    let bytes = 0
    for (const s of this.#segments) bytes += s.bytes
    return { segments: this.#segments.size, bytes }
  }

  /** Deletes a replayed segment (and its directory once empty). */
  async discard(seg: RecoveredSegment): Promise<void> {
    await unlink(seg.path).catch(() => {})
    const left = (await readdir(seg.dir).catch(() => [] as string[])).filter((f) => f.endsWith('.jsonl'))
    if (left.length === 0) await removeDir(seg.dir)
  }

  /** `process` durability: flushes what was written since the last flush (one fdatasync at a time). */
  #syncDirty(): Promise<void> {
    if (this.#syncing || this.#dirty.size === 0) return this.#syncing ?? Promise.resolve()
    const segs = [...this.#dirty]
    this.#dirty.clear()
    const p = Promise.all(segs.map((s) => s.fh?.datasync().catch(() => {}))).then(() => {})
    this.#syncing = p.finally(() => {
      this.#syncing = undefined
    })
    return this.#syncing
  }

  /** Waits for pending writes, closes files; deletes segments fully in the database, keeps the rest. */
  async close(): Promise<{ kept: number }> {
    this.#closed = true
    clearInterval(this.#syncTimer)
    await this.#writing?.catch(() => {})
    await this.#syncing
    await this.#syncDirty()
    let kept = 0
    for (const seg of [...this.#segments]) {
      await seg.fh?.close().catch(() => {})
      seg.fh = undefined
      seg.sealed = true
      if (seg.outstanding <= 0) await this.#delete(seg)
      else kept += seg.outstanding
    }
    if (this.#segments.size === 0) await removeDir(this.dir)
    else await unlink(join(this.dir, LOCK)).catch(() => {})
    return { kept }
  }

  /** The active segment when the next group may go into it (no await: the common case). */
  #reusable(): Segment | undefined {
    const cur = this.#active
    // Rotate when full, or when the database has caught up on a segment past 1 MiB: a new segment
    // costs an open and a directory fsync, so a caught-up segment is not recycled per group.
    const recycle = Math.min(1 << 20, this.#segmentBytes)
    if (cur && !cur.sealed && cur.bytes < this.#segmentBytes && !(cur.bytes >= recycle && cur.outstanding <= 0)) return cur
    return undefined
  }

  async #rotate(): Promise<Segment> {
    if (this.#active) await this.#seal(this.#active)
    const path = join(this.dir, `${String(++this.#seq).padStart(12, '0')}.jsonl`)
    const seg: Segment = { path, bytes: 0, outstanding: 0, sealed: false, fh: await open(path, this.#flags, 0o600) }
    await syncDir(this.dir)
    this.#segments.add(seg)
    this.#active = seg
    return seg
  }

  async #seal(seg: Segment): Promise<void> {
    if (seg.sealed) return
    seg.sealed = true
    if (this.#active === seg) this.#active = undefined
    if (this.#dirty.delete(seg)) await seg.fh?.datasync().catch(() => {})
    await seg.fh?.close().catch(() => {})
    seg.fh = undefined
    if (seg.outstanding <= 0) await this.#delete(seg)
  }

  async #delete(seg: Segment): Promise<void> {
    if (!this.#segments.delete(seg)) return
    await unlink(seg.path).catch(() => {})
  }
}

async function isStale(dir: string): Promise<boolean> {
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

async function removeDir(dir: string): Promise<void> {
  await rm(join(dir, LOCK), { force: true }).catch(() => {})
  await rmdir(dir).catch(() => {})
}

/** Makes a created or renamed directory entry durable. */
async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r').catch(() => undefined)
  await fh?.sync().catch(() => {})
  await fh?.close().catch(() => {})
}

function safeHost(): string {
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
