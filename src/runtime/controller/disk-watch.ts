// The host's check of a workspace's disk quota (docs/runtime.md "Resource limits"). The reference
// agent polices /data itself, but a pack's agent need not, and RLIMIT_FSIZE only bounds one file:
// so while a task runs the controller measures /data from outside, on a timer and once more when
// the task ends, and fails the task when the tree is over the quota.
//
// The walk runs inside `corral serve`, next to the API and the proxy, so it is asynchronous and
// keeps only a few lstat/readdir calls in flight: they run on libuv's small thread pool (4 threads
// by default), which the proxy's DNS lookups and file reads share. It never follows a link and
// counts what `du` counts: allocated blocks, directories included, a hard-linked file once.
import { lstat, readdir } from 'node:fs/promises'
import { join } from 'node:path'

const MIB = 1024 * 1024
/**
 * The pause after a walk is at least this many times the walk's duration, so one workspace's watch
 * keeps the machine busy at most a tenth of the time however large its tree (a walk costs about
 * 25 µs of CPU per entry: 20,000 entries ≈ 0.5 s; docs/runtime.md "Resource limits").
 */
const PAUSE_PER_WALK = 9

export interface DiskUsage {
  /** Allocated bytes of the tree (st_blocks × 512), like `du -s -B1`. */
  usedBytes: number
  /** Entries visited, the root included. */
  entries: number
}

export interface MeasureOptions {
  /** lstat/readdir calls in flight at most. Default 4. */
  concurrency?: number
  /** Stops the walk early (the task ended meanwhile); the promise then rejects with the reason. */
  signal?: AbortSignal
}

/**
 * The allocated size of the tree at `root`. Entries that vanish or cannot be read during the walk
 * are skipped (an agent deletes files while we look); a missing root measures 0.
 */
export async function measureDisk(root: string, options: MeasureOptions = {}): Promise<DiskUsage> {
  const concurrency = Math.max(1, options.concurrency ?? 4)
  const signal = options.signal
  // Paths still to lstat; a directory's children are pushed once it has been read. Depth first
  // (a stack) keeps the list as short as the widest directory plus the path to it.
  const pending: string[] = [root]
  const hardLinks = new Set<string>()
  let usedBytes = 0
  let entries = 0
  let inFlight = 0
  let waiting: Array<() => void> = []
  const wakeAll = (): void => {
    const w = waiting
    waiting = []
    for (const resolve of w) resolve()
  }

  const visit = async (path: string): Promise<void> => {
    const st = await lstat(path).catch(() => null)
    if (!st) return
    entries++
    if (st.nlink > 1 && !st.isDirectory()) {
      const key = `${st.dev}:${st.ino}`
      if (hardLinks.has(key)) return
      hardLinks.add(key)
    }
    usedBytes += st.blocks * 512
    if (!st.isDirectory()) return
    const names = await readdir(path).catch(() => [] as string[])
    for (const name of names) pending.push(join(path, name))
  }

  const worker = async (): Promise<void> => {
    for (;;) {
      signal?.throwIfAborted()
      const path = pending.pop()
      if (path === undefined) {
        if (inFlight === 0) {
          wakeAll()
          return
        }
        // Others are still reading directories that may add work: wait for one of them.
        await new Promise<void>((resolve) => waiting.push(resolve))
        continue
      }
      inFlight++
      try {
        await visit(path)
      } finally {
        inFlight--
        wakeAll()
      }
    }
  }

  await Promise.all(Array.from({ length: concurrency }, worker))
  return { usedBytes, entries }
}

/**
 * The task's summary when it fails over the quota (the reference agent's wording), with as many
 * decimals as it takes for the two sizes to differ (`1.004 MB, over its disk quota of 1.000 MB`).
 */
export function diskOverText(usedBytes: number, quotaBytes: number): string {
  let digits = 1
  while (digits < 6 && (usedBytes / MIB).toFixed(digits) === (quotaBytes / MIB).toFixed(digits)) digits++
  const mb = (n: number): string => (n / MIB).toFixed(digits)
  return `The workspace directory uses ${mb(usedBytes)} MB, over its disk quota of ${mb(quotaBytes)} MB.`
}

export interface DiskWatchOptions {
  /** Host path of the workspace's /data. */
  dir: string
  /** Allocated bytes allowed; over it (strictly) is over the quota. */
  quotaBytes: number
  /** Pause between the end of one measurement and the start of the next. */
  intervalMs: number
  /** Called once, with the measurement that found the tree over the quota; the watch then stops. */
  onOver: (usage: DiskUsage) => void
  /** A measurement that failed (not a vanished file: those are skipped); the watch goes on. */
  onError?: (err: unknown) => void
}

/** Quota bytes of `diskMb` MiB; 0 (no quota) stays 0. */
export function quotaBytes(diskMb: number): number {
  return diskMb > 0 ? diskMb * MIB : 0
}

/**
 * Measures `dir` every `intervalMs` while a task runs. Measurements never overlap: the next one
 * is scheduled when the previous one is done, and no sooner than PAUSE_PER_WALK times its duration,
 * so a large tree slows the watch down instead of taking a core. `stop()` cancels the timer and
 * abandons a walk under way.
 *
 * The first measurement is taken at once and sets the task's allowance: the quota, or the size
 * /data already had when that is more. A task that starts over the quota (its predecessor failed
 * for it) is so given the chance to delete files; it is stopped only if /data grows past both.
 * Whether a task may *end* over the quota is `check()`'s answer, which uses the quota alone.
 */
export class DiskWatch {
  readonly #o: DiskWatchOptions
  readonly #abort = new AbortController()
  #timer: NodeJS.Timeout | undefined
  #allowance: number | undefined

  constructor(options: DiskWatchOptions) {
    this.#o = options
    this.#schedule(0)
  }

  /** Bytes this task's /data may reach while it runs; undefined until the first measurement. */
  get allowanceBytes(): number | undefined {
    return this.#allowance
  }

  get stopped(): boolean {
    return this.#abort.signal.aborted
  }

  stop(): void {
    if (this.#timer) clearTimeout(this.#timer)
    this.#timer = undefined
    this.#abort.abort()
  }

  /** One measurement now (the end-of-task check): the usage when over the quota, else null. */
  async check(): Promise<DiskUsage | null> {
    const usage = await measureDisk(this.#o.dir)
    return usage.usedBytes > this.#o.quotaBytes ? usage : null
  }

  #schedule(delayMs = this.#o.intervalMs): void {
    if (this.stopped) return
    this.#timer = setTimeout(() => void this.#tick(), delayMs)
    this.#timer.unref()
  }

  async #tick(): Promise<void> {
    this.#timer = undefined
    const started = performance.now()
    const next = (): void => this.#schedule(Math.max(this.#o.intervalMs, PAUSE_PER_WALK * (performance.now() - started)))
    let usage: DiskUsage
    try {
      usage = await measureDisk(this.#o.dir, { signal: this.#abort.signal })
    } catch (err) {
      if (this.stopped) return
      this.#o.onError?.(err)
      next()
      return
    }
    if (this.stopped) return
    if (this.#allowance === undefined) this.#allowance = Math.max(this.#o.quotaBytes, usage.usedBytes)
    if (usage.usedBytes > this.#allowance) {
      this.stop()
      this.#o.onOver(usage)
      return
    }
    next()
  }
}
