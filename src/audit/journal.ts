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
// Disk full (docs/reliability.md "A full disk"): the journal keeps a *standby* segment, written
// with zeros ahead of need and synced, so the rows of requests that were already forwarded when the
// disk filled still have allocated space to go to. A write that fails for lack of space moves to
// the standby (positional writes into its allocated blocks), and from the first failed write until
// a new standby could be written the journal reports itself not `healthy`, which closes the
// proxy's gate before anything more is forwarded (src/proxy/audit-gate.ts). A failed background
// fdatasync does the same. Replay reads a segment up to its first NUL (no line has one).

import { randomBytes } from 'node:crypto'
import { hostname } from 'node:os'
import { constants, writeSync } from 'node:fs'
import { mkdir, open, readFile, readdir, rename, unlink, writeFile, type FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import { ownStartTicks } from '../proc/index.js'
import { LOCK, isStale, removeDir, safeHost, syncDir, type JournalDurability } from './journal-files.js'

export interface Segment {
  readonly path: string
  bytes: number
  /** Lines written to this segment whose events are not yet in the database. */
  outstanding: number
  sealed: boolean
  fh?: FileHandle
  /** A standby segment: allocated ahead to this many bytes; written at `bytes`, never past it. */
  capacity?: number
}

/** A segment of a writer that is gone: its lines are replayed, then it is discarded. */
export interface RecoveredSegment {
  readonly dir: string
  readonly path: string
  readonly lines: string[]
  /** The last line had no newline: a write cut short by the crash (never acknowledged). */
  readonly tornTail: boolean
}

/** Characters written per group at most (the writer bounds its groups with it). */
export const MAX_GROUP_CHARS = 1 << 20
// Append; with `host` durability each write is on disk before it returns (data and the size needed to read it back).
const DSYNC = constants.O_DSYNC as number | undefined
const APPEND_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_APPEND
// A standby segment is written at explicit offsets into blocks allocated ahead (no O_APPEND).
const STANDBY_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | (DSYNC ?? 0)
/** A standby segment's name ends so; replayed like any segment (its lines end at the first NUL). */
const STANDBY_SUFFIX = '.jsonl.standby'
const isSegmentFile = (f: string): boolean => f.endsWith('.jsonl') || f.endsWith(STANDBY_SUFFIX)

export type { JournalDurability } from './journal-files.js'

export interface JournalOptions {
  /** Segment size before rotation (default 8 MiB). */
  segmentBytes?: number
  /** Default `process`. */
  durability?: JournalDurability
  /** With `process`: how often written data is flushed to disk in the background (default 100 ms). */
  syncIntervalMs?: number
  /** Bytes of the standby segment kept allocated for a full disk (default 4 MiB; 0: none). */
  reserveBytes?: number
}

/** Default size of the standby segment: the rows of a few thousand requests in flight. */
export const DEFAULT_RESERVE_BYTES = 4 << 20
/** While the journal is not healthy, how often it tries to write a new standby. */
const RESTORE_MS = 500
const NO_SPACE = new Set(['ENOSPC', 'EDQUOT', 'EFBIG'])

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
  readonly #reserveBytes: number
  #standby: Segment | undefined
  /** Why the journal is not healthy (a failed write or sync, the standby in use); undefined: healthy. */
  #degraded: string | undefined
  #degradedSince = -Infinity
  #restoreTimer: NodeJS.Timeout | undefined
  #restoring: Promise<boolean> | undefined

  private constructor(dir: string, opts: JournalOptions) {
    this.dir = dir
    this.#segmentBytes = opts.segmentBytes ?? 8 << 20
    this.#durability = opts.durability ?? 'process'
    this.#flags = APPEND_FLAGS | (this.#durability === 'host' ? (DSYNC ?? 0) : 0)
    this.#reserveBytes = Math.max(0, opts.reserveBytes ?? DEFAULT_RESERVE_BYTES)
    if (this.#durability === 'process') {
      this.#syncTimer = setInterval(() => void this.#syncDirty(), Math.max(1, opts.syncIntervalMs ?? 100))
      this.#syncTimer.unref()
    }
  }

  get durability(): JournalDurability {
    return this.#durability
  }

  /**
   * Whether a row written now is known to fit: the last write and background sync succeeded and
   * the standby is in place (when one is kept). Read on every proxied request: a field, no I/O.
   */
  get healthy(): boolean {
    return this.#degraded === undefined
  }

  /** Why the journal is not healthy, for /healthz and logs; undefined when it is. */
  get degraded(): string | undefined {
    return this.#degraded
  }

  /** performance.now() when the journal last became unhealthy. */
  get degradedSince(): number {
    return this.#degradedSince
  }

  /** Claims a fresh directory under `root` and returns the segments left by writers that are gone. */
  static async open(root: string, opts: JournalOptions = {}): Promise<{ journal: Journal; recovered: RecoveredSegment[] }> {
    await mkdir(root, { recursive: true, mode: 0o700 })
    const recovered: RecoveredSegment[] = []
    for (const name of (await readdir(root)).sort()) {
      if (name.startsWith('.')) continue
      const dir = join(root, name)
      if (!(await isStale(dir))) continue
      for (const file of (await readdir(dir).catch(() => [] as string[])).filter(isSegmentFile).sort()) {
        const path = join(dir, file)
        const raw = await readFile(path, 'utf8')
        // A standby segment's allocated tail is zeros: its lines end at the first NUL.
        const nul = raw.indexOf('\0')
        const text = nul < 0 ? raw : raw.slice(0, nul)
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
    const journal = new Journal(join(root, name), opts)
    // Without room for its standby the journal starts unhealthy and keeps trying.
    if (journal.#reserveBytes > 0 && !(await journal.#prepareStandby())) journal.#degrade('no space for the standby segment')
    return { journal, recovered }
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
    const buf = Buffer.from(text, 'utf8')
    let seg: Segment | undefined
    try {
      seg = this.#reusable(buf.length) ?? (await this.#rotate())
      await this.#put(seg, buf)
    } catch (err) {
      // A half-written group must not sit in front of the next one: start a new segment.
      if (seg) await this.#seal(seg)
      const standby = this.#standby
      const code = (err as { code?: string })?.code
      this.#degrade(code ?? 'write failed')
      if (!standby || !NO_SPACE.has(code ?? '') || buf.length > standby.capacity!) throw err
      // The disk is full: this group goes into the space allocated ahead for it.
      this.#standby = undefined
      this.#segments.add(standby)
      this.#active = seg = standby
      await this.#put(seg, buf)
    }
    seg.bytes += buf.length
    seg.outstanding += lines
    return seg
  }

  /** Writes `buf` at the end of `seg` (at its `bytes` in a standby segment, whose blocks are allocated). */
  async #put(seg: Segment, buf: Buffer): Promise<void> {
    const at = seg.capacity === undefined ? null : seg.bytes
    let off = 0
    if (this.#durability === 'process') {
      // Synchronous on purpose: a page-cache write costs a syscall, a threadpool round trip costs
      // two thread wakeups and delays the answer by a turn; the kernel owns the bytes on return.
      const fd = seg.fh!.fd
      while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off, at === null ? null : at + off)
      if (at === null || DSYNC === undefined) this.#dirty.add(seg)
    } else {
      while (off < buf.length) off += (await seg.fh!.write(buf, off, buf.length - off, at === null ? null : at + off)).bytesWritten
      if (DSYNC === undefined) await seg.fh!.datasync()
    }
  }

  /** Not healthy until a new standby is written (tried every RESTORE_MS). */
  #degrade(reason: string): void {
    if (this.#degraded === undefined) {
      this.#degraded = reason
      this.#degradedSince = performance.now()
    }
    if (this.#restoreTimer || this.#closed) return
    this.#restoreTimer = setInterval(() => void this.#restore(), RESTORE_MS)
    this.#restoreTimer.unref()
  }

  #restore(): Promise<boolean> {
    this.#restoring ??= (async () => {
      const ok = this.#reserveBytes > 0 ? (this.#standby !== undefined || (await this.#prepareStandby())) : await this.#probe()
      if (ok && !this.#closed) {
        this.#degraded = undefined
        clearInterval(this.#restoreTimer)
        this.#restoreTimer = undefined
      }
      return ok
    })().finally(() => {
      this.#restoring = undefined
    })
    return this.#restoring
  }

  /**
   * Writes the standby segment: `reserveBytes` of zeros, synced, so its blocks are allocated
   * before they are needed. False when the disk has no room for it (nothing is left behind).
   */
  async #prepareStandby(): Promise<boolean> {
    if (this.#closed) return false
    const path = join(this.dir, `${String(++this.#seq).padStart(12, '0')}${STANDBY_SUFFIX}`)
    let fh: FileHandle | undefined
    try {
      // Synced on every write (O_DSYNC): it is only written to when the disk is already in trouble.
      fh = await open(path, STANDBY_FLAGS, 0o600)
      const zeros = Buffer.alloc(Math.min(1 << 20, this.#reserveBytes))
      for (let off = 0; off < this.#reserveBytes;) off += (await fh.write(zeros, 0, Math.min(zeros.length, this.#reserveBytes - off), off)).bytesWritten
      if (DSYNC === undefined) await fh.datasync()
      await syncDir(this.dir)
      this.#standby = { path, bytes: 0, outstanding: 0, sealed: false, fh, capacity: this.#reserveBytes }
      return true
    } catch {
      await fh?.close().catch(() => {})
      await unlink(path).catch(() => {})
      return false
    }
  }

  /** Without a standby: whether a small synced write succeeds in the journal's directory. */
  async #probe(): Promise<boolean> {
    const path = join(this.dir, 'PROBE')
    try {
      await writeFile(path, 'probe\n', { flush: true })
      return true
    } catch {
      return false
    } finally {
      await unlink(path).catch(() => {})
    }
  }

  /** The events of `n` lines of `seg` are in the database. */
  release(seg: Segment, n = 1): void {
    seg.outstanding -= n
    if (seg.sealed && seg.outstanding <= 0) void this.#delete(seg)
  }

  /** Bytes in live segments and their count. */
  stats(): { segments: number; bytes: number; degraded?: string } {
    let bytes = 0
    for (const s of this.#segments) bytes += s.bytes
    return { segments: this.#segments.size, bytes, ...(this.#degraded !== undefined ? { degraded: this.#degraded } : {}) }
  }

  /** Deletes a replayed segment (and its directory once empty). */
  async discard(seg: RecoveredSegment): Promise<void> {
    await unlink(seg.path).catch(() => {})
    const left = (await readdir(seg.dir).catch(() => [] as string[])).filter(isSegmentFile)
    if (left.length === 0) await removeDir(seg.dir)
  }

  /** `process` durability: flushes what was written since the last flush (one fdatasync at a time). */
  #syncDirty(): Promise<void> {
    if (this.#syncing || this.#dirty.size === 0) return this.#syncing ?? Promise.resolve()
    const segs = [...this.#dirty]
    this.#dirty.clear()
    // A failed flush may have lost acknowledged pages: nothing more is forwarded until the disk takes a write again.
    const p = Promise.all(segs.map((s) => s.fh?.datasync().catch((err: { code?: string }) => this.#degrade(`fdatasync ${err?.code ?? 'failed'}`)))).then(() => {})
    this.#syncing = p.finally(() => {
      this.#syncing = undefined
    })
    return this.#syncing
  }

  /** Waits for pending writes, closes files; deletes segments fully in the database, keeps the rest. */
  async close(): Promise<{ kept: number }> {
    this.#closed = true
    clearInterval(this.#syncTimer)
    clearInterval(this.#restoreTimer)
    await this.#restoring
    await this.#writing?.catch(() => {})
    const standby = this.#standby
    this.#standby = undefined
    if (standby) {
      await standby.fh?.close().catch(() => {})
      await unlink(standby.path).catch(() => {})
    }
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

  /** The active segment when the next group (`size` bytes) may go into it (no await: the common case). */
  #reusable(size: number): Segment | undefined {
    const cur = this.#active
    if (cur?.capacity !== undefined && cur.bytes + size > cur.capacity) return undefined
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

