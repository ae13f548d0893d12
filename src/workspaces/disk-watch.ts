// The host's check of a workspace's disk quota (docs/runtime.md "Disk quota"). Where the kernel
// holds the quota (/data a filesystem of the quota's size, runtime/data-image.ts) the check only
// tells the task's outcome: a full /data is at the quota, the kernel having refused what did not
// fit. Elsewhere it is the scan fallback, the only bound there is: the reference agent polices /data
// itself, but a pack's agent need not, and RLIMIT_FSIZE only bounds one file; so while a task runs
// the lifecycle measures /data from outside, on a timer and once more when the task ends, and
// fails the task when the tree is over the quota. The measurement is the
// workspace volume's (`WorkspaceVolume.usage`; the local drivers run du, runtime/disk-usage.ts);
// one that fails or times out is unknown (the watch keeps the last known size), never zero.
import { DEFAULT_MEASURE_TIMEOUT_MS, DiskMeasureError, measureDisk, type DiskUsage, type MeasureOptions } from '../runtime/index.js'

export { DEFAULT_MEASURE_TIMEOUT_MS, DiskMeasureError, measureDisk, type DiskUsage, type MeasureOptions }

const MIB = 1024 * 1024
/**
 * The pause after a measurement is at least this many times its duration, so one workspace's watch
 * keeps the machine busy at most a tenth of the time however large its tree (docs/runtime.md
 * "Resource limits").
 */
const PAUSE_PER_WALK = 9
/**
 * The task's summary when it fails over the quota (the reference agent's wording), with as many
 * decimals as it takes for the two sizes to differ (`1.004 MB, over its disk quota of 1.000 MB`).
 */
export function diskOverText(usedBytes: number, quotaBytes: number, usage?: DiskUsage): string {
  if (usage?.full && usedBytes <= quotaBytes) {
    return `The workspace directory reached its disk quota of ${(quotaBytes / MIB).toFixed(1)} MB: writes past it were refused.`
  }
  let digits = 1
  while (digits < 6 && (usedBytes / MIB).toFixed(digits) === (quotaBytes / MIB).toFixed(digits)) digits++
  const mb = (n: number): string => (n / MIB).toFixed(digits)
  return `The workspace directory uses ${mb(usedBytes)} MB, over its disk quota of ${mb(quotaBytes)} MB.`
}

export interface DiskWatchOptions {
  /** Host path of the workspace's /data, measured with du (when no `measure` is given). */
  dir?: string
  /** The measurement of /data (a workspace volume's `usage`); default measureDisk(dir). */
  measure?: (options: MeasureOptions) => Promise<DiskUsage>
  /** Allocated bytes allowed; over it (strictly) is over the quota. */
  quotaBytes: number
  /** Pause between the end of one measurement and the start of the next. */
  intervalMs: number
  /** Called once, with the measurement that found the tree over the quota; the watch then stops. */
  onOver: (usage: DiskUsage) => void
  /** A measurement that failed or timed out (its size is unknown); the watch goes on. */
  onError?: (err: unknown) => void
  /** Time limit of each measurement; default DEFAULT_MEASURE_TIMEOUT_MS. */
  measureTimeoutMs?: number
  /** The du binary; default `du` from PATH. */
  du?: string
  /**
   * What /data is known to hold before the task (the previous task's last measurement, or 0 for a
   * workspace that never ran one): the allowance is set from it at once, `ready` settles at once
   * and the first measurement waits one interval, so a task's hand-over (a warm claim's above all)
   * never waits for a `du` run. Without it, the first measurement is taken at once and awaited.
   */
  baselineBytes?: number
  /** The baseline /data was full (a kernel-held quota reached by the task before). */
  baselineFull?: boolean
}

/** Whether a measurement says /data is past the quota: over it, or full where the kernel holds it. */
export function overQuota(usage: DiskUsage, quotaBytes: number): boolean {
  return usage.usedBytes > quotaBytes || usage.full === true
}

/** Quota bytes of `diskMb` MiB; 0 (no quota) stays 0. */
export function quotaBytes(diskMb: number): number {
  return diskMb > 0 ? diskMb * MIB : 0
}

/**
 * Measures `dir` every `intervalMs` while a task runs. Measurements never overlap: the next one
 * is scheduled when the previous one is done, and no sooner than PAUSE_PER_WALK times its duration,
 * so a large tree slows the watch down instead of taking a core. `stop()` cancels the timer and
 * kills a measurement under way.
 *
 * The first measurement is taken at once (`ready` settles when it is done: the controller awaits
 * it before handing the task over) and sets the task's allowance: the quota, or the size /data
 * already had when that is more. A task that starts over the quota (its predecessor failed for
 * it) is so given the chance to delete files; it is stopped only if /data grows past both.
 * Whether a task may *end* over the quota is `check()`'s answer, which uses the quota alone.
 *
 * A failed measurement is unknown, not zero: it is reported to `onError` and the last known size
 * stands (for the allowance, a failed first measurement leaves it at the quota).
 */
export class DiskWatch {
  readonly #o: DiskWatchOptions
  readonly #abort = new AbortController()
  readonly ready: Promise<void>
  #firstDone!: () => void
  #timer: NodeJS.Timeout | undefined
  #allowance: number | undefined
  /** /data was full when the task began: the task may free space; being full is over only if it was not. */
  #startedFull: boolean | undefined
  #last: DiskUsage | undefined

  constructor(options: DiskWatchOptions) {
    this.#o = options
    this.ready = new Promise<void>((resolve) => (this.#firstDone = resolve))
    if (options.baselineBytes === undefined) {
      this.#schedule(0)
      return
    }
    this.#allowance = Math.max(options.quotaBytes, options.baselineBytes)
    this.#startedFull = options.baselineFull === true
    this.#firstDone()
    this.#schedule()
  }

  /** Bytes this task's /data may reach while it runs; undefined until the first measurement. */
  get allowanceBytes(): number | undefined {
    return this.#allowance
  }

  /** The last successful measurement, if any. */
  get lastUsage(): DiskUsage | undefined {
    return this.#last
  }

  get stopped(): boolean {
    return this.#abort.signal.aborted
  }

  stop(): void {
    if (this.#timer) clearTimeout(this.#timer)
    this.#timer = undefined
    this.#abort.abort()
    this.#firstDone()
  }

  /**
   * One measurement now (the end-of-task check): the usage when over the quota, else null. When
   * it fails, the last known size decides (reported to onError); with none known it rejects.
   */
  async check(): Promise<DiskUsage | null> {
    let usage: DiskUsage
    try {
      usage = await this.#measure(this.#measureOptions())
    } catch (err) {
      if (!this.#last) throw err
      this.#o.onError?.(err)
      usage = this.#last
    }
    this.#last = usage
    return overQuota(usage, this.#o.quotaBytes) ? usage : null
  }

  /** One measurement now, kept as the last one; rejects when it fails (no fallback to an older size). */
  async measureNow(): Promise<DiskUsage> {
    this.#last = await this.#measure(this.#measureOptions())
    return this.#last
  }

  #measure(options: MeasureOptions): Promise<DiskUsage> {
    if (this.#o.measure) return this.#o.measure(options)
    if (this.#o.dir === undefined) return Promise.reject(new DiskMeasureError('no /data to measure'))
    return measureDisk(this.#o.dir, options)
  }

  #measureOptions(signal?: AbortSignal): MeasureOptions {
    return { ...(this.#o.measureTimeoutMs ? { timeoutMs: this.#o.measureTimeoutMs } : {}), ...(this.#o.du ? { du: this.#o.du } : {}), ...(signal ? { signal } : {}) }
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
      usage = await this.#measure(this.#measureOptions(this.#abort.signal))
    } catch (err) {
      if (this.stopped) return
      this.#o.onError?.(err)
      this.#allowance ??= this.#o.quotaBytes
      this.#firstDone()
      next()
      return
    }
    if (this.stopped) return
    this.#last = usage
    this.#allowance ??= Math.max(this.#o.quotaBytes, usage.usedBytes)
    this.#startedFull ??= usage.full === true
    this.#firstDone()
    if (usage.usedBytes > this.#allowance || (usage.full && !this.#startedFull)) {
      this.stop()
      this.#o.onOver(usage)
      return
    }
    next()
  }
}
