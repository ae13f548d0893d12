// The size of a directory tree on this host, as the disk quota counts it (docs/runtime.md
// "Resource limits"): `du -sx -B1` (GNU coreutils) in a child process, off serve's event loop and
// thread pool. du walks by file descriptor (no PATH_MAX limit however deep the tree), never
// follows a symlink, stays on the tree's filesystem and counts allocated blocks, directories
// included, a hard-linked file once. A walk in serve itself (lstat by absolute path) skipped paths
// deeper than PATH_MAX and could be led to / by a directory swapped for a symlink between its lstat
// and readdir. Every measurement has a time limit; one that fails or times out is unknown, never zero.
import { lstat } from 'node:fs/promises'

/** A measurement that takes longer is abandoned (du is killed) and counts as failed. */
export const DEFAULT_MEASURE_TIMEOUT_MS = 30_000

export interface DiskUsage {
  /** Allocated bytes of the tree (st_blocks × 512), like `du -s -B1`. */
  usedBytes: number
  /**
   * The kernel enforces the quota on this volume (a filesystem of its own, data-image.ts): it can
   * never be over, and `full` says it is at the quota (the kernel refuses writes). Absent: a scan.
   */
  kernel?: boolean
  full?: boolean
}

export interface MeasureOptions {
  /** Kills du after this long; the measurement then rejects. Default DEFAULT_MEASURE_TIMEOUT_MS. */
  timeoutMs?: number
  /** Stops the measurement early (the task ended meanwhile); the promise then rejects with the reason. */
  signal?: AbortSignal
  /** The du binary; default `du` from PATH. */
  du?: string
  /**
   * What /data is known to hold before the task (the previous task's last measurement, or 0 for a
   * workspace that never ran one): the allowance is set from it at once, `ready` settles at once
   * and the first measurement waits one interval, so a task's hand-over (a warm claim's above all)
   * never waits for a `du` run. Without it, the first measurement is taken at once and awaited.
   */
  baselineBytes?: number
}

export class DiskMeasureError extends Error {}

/**
 * The allocated size of the tree at `root`; a missing root measures 0. Entries du cannot read
 * (they vanish while the agent deletes them, or are unreadable) make du exit 1 with the total of
 * the rest: that total is a lower bound and is used. No total at all (du missing, killed, timed
 * out) rejects with a DiskMeasureError.
 */
export async function measureDisk(root: string, options: MeasureOptions = {}): Promise<DiskUsage> {
  options.signal?.throwIfAborted()
  const timeout = options.timeoutMs ?? DEFAULT_MEASURE_TIMEOUT_MS
  // execa is loaded by the first measurement: a serve without a disk quota never needs it.
  const { execa } = await import('execa')
  const result = await execa(options.du ?? 'du', ['-sx', '-B1', '--', root], {
    reject: false, timeout, ...(options.signal ? { cancelSignal: options.signal } : {}),
    env: { LC_ALL: 'C' }, extendEnv: false, stdin: 'ignore', maxBuffer: 1024 * 1024,
  })
  options.signal?.throwIfAborted()
  const total = /^(\d+)\t/.exec(result.stdout)
  if (total && !result.timedOut && !result.isTerminated) return { usedBytes: Number(total[1]) }
  if (await lstat(root).then(() => false, (err: NodeJS.ErrnoException) => err.code === 'ENOENT')) return { usedBytes: 0 }
  const why = result.timedOut ? `timed out after ${timeout} ms` : result.code === 'ENOENT' ? 'du (coreutils) is not installed' : result.stderr.trim().split('\n')[0] || result.shortMessage
  throw new DiskMeasureError(`measuring ${root} failed: ${why}`)
}

