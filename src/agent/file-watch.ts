// Which files a shell command changed under /data, found by comparing two cheap manifests (path →
// size, mtime, mode, inode) taken with lstat. A command can do anything (`git clone`, `rm -rf`,
// `mv`, a background job), so the tree itself is the only reliable witness; the kernel's inotify
// would need one watch per directory and still miss changes made while it is being set up.
import { lstatSync, readdirSync, type Stats } from 'node:fs'
import { lstat } from 'node:fs/promises'
import { join } from 'node:path'

/** One file_change event body (without type and iteration). */
export interface FileChange {
  /** Relative to the watched root, `/`-separated. */
  path: string
  action: 'created' | 'modified' | 'deleted'
  /** Bytes after the change; absent for `deleted`. */
  size?: number
  /** Set on the last event of a command that changed more paths than the event cap. */
  truncated?: true
  /** With `truncated`: how many further changes were not reported one by one. */
  omitted?: number
  /** The tree had more entries than the scan limit: paths past the limit were not compared. */
  scan_truncated?: true
}

interface Entry {
  size: number
  mtimeMs: number
  mode: number
  ino: number
}

export interface Manifest {
  /** Non-directory entries (files, symlinks, sockets…), keyed by relative path. */
  readonly entries: Map<string, Entry>
  /** The walk stopped at the entry limit; `last` is the last path it recorded. */
  readonly truncated: boolean
  readonly last: string | null
  /**
   * Allocated bytes of the whole tree (directories included, hard links once), like `du`. Counted
   * past the entry limit only when `countAllBytes` was asked for (a disk quota needs the full sum).
   */
  readonly bytes: number
}

export interface ScanOptions {
  /** Entries (directories included) recorded at most. Default 20,000. */
  maxEntries?: number
  /** Keep summing allocated bytes after the entry limit (no entries recorded). */
  countAllBytes?: boolean
  /** Top-level names left out of the entries (their bytes still count with `countAllBytes`). */
  skipTopLevel?: readonly string[]
}

export const MAX_SCAN_ENTRIES = 20_000
/** file_change events per shell command at most; the last one says how many more there were. */
export const MAX_CHANGE_EVENTS = 100

/**
 * Walks `root` depth first in sorted order, so two scans of an unchanged tree record the same
 * prefix, and a truncated pair can be compared up to the earlier of their last paths.
 * Synchronous on purpose: the agent waits for the tool anyway, and sync lstat is several times
 * faster than the promise API here (docs/agent.md has the figures).
 */
export async function scanTree(root: string, options: ScanOptions = {}): Promise<Manifest> {
  const max = options.maxEntries ?? MAX_SCAN_ENTRIES
  const skip = new Set(options.skipTopLevel ?? [])
  const entries = new Map<string, Entry>()
  const seenLinks = new Set<string>()
  let visited = 0
  let bytes = 0
  let truncated = false
  let last: string | null = null

  // `record` false: a skipped top-level directory, walked only for its bytes.
  const walk = (dir: string, rel: string, record: boolean): void => {
    let names: string[]
    try {
      names = readdirSync(dir).sort()
    } catch {
      return // vanished or unreadable: nothing under it
    }
    for (const name of names) {
      const recorded = record && !(rel === '' && skip.has(name))
      if (!recorded && !options.countAllBytes) continue
      if (recorded && visited >= max) truncated = true
      if (truncated && !options.countAllBytes) return
      const path = rel === '' ? name : `${rel}/${name}`
      const st = statOrNull(join(dir, name))
      if (!st) continue
      if (st.nlink > 1 && !st.isDirectory()) {
        const key = `${st.dev}:${st.ino}`
        if (!seenLinks.has(key)) bytes += st.blocks * 512
        seenLinks.add(key)
      } else {
        bytes += st.blocks * 512
      }
      if (recorded && !truncated) {
        visited++
        last = path
        if (!st.isDirectory()) entries.set(path, { size: st.size, mtimeMs: st.mtimeMs, mode: st.mode, ino: st.ino })
      }
      if (st.isDirectory()) walk(join(dir, name), path, recorded)
    }
  }
  walk(root, '', true)
  return { entries, truncated, last, bytes }
}

/** Gone (deleted meanwhile) or unreadable (a directory the agent made 0700 and then 0000): skipped. */
function statOrNull(path: string): Stats | null {
  try {
    return lstatSync(path)
  } catch {
    return null
  }
}

/** Order of the sorted depth-first walk: segment by segment, a directory before what it holds. */
export function walkOrder(a: string, b: string): number {
  const as = a.split('/')
  const bs = b.split('/')
  for (let i = 0; i < Math.min(as.length, bs.length); i++) {
    if (as[i] !== bs[i]) return as[i]! < bs[i]! ? -1 : 1
  }
  return as.length - bs.length
}

/**
 * The changes from `before` to `after`, sorted by path. When either scan was truncated only paths
 * up to the earlier last path are compared (beyond it one scan simply did not look), and every
 * change carries `scan_truncated`.
 */
export function diffManifests(before: Manifest, after: Manifest): FileChange[] {
  const partial = before.truncated || after.truncated
  let cutoff: string | null = null
  if (partial) {
    const ends = [before.truncated ? before.last : null, after.truncated ? after.last : null].filter((p): p is string => p !== null)
    cutoff = ends.length === 0 ? '' : ends.reduce((x, y) => (walkOrder(x, y) <= 0 ? x : y))
  }
  const compared = (path: string): boolean => cutoff === null || (cutoff !== '' && walkOrder(path, cutoff) <= 0)
  const flag = partial ? { scan_truncated: true as const } : {}
  const changes: FileChange[] = []
  for (const [path, now] of after.entries) {
    if (!compared(path)) continue
    const was = before.entries.get(path)
    if (!was) changes.push({ path, action: 'created', size: now.size, ...flag })
    else if (was.size !== now.size || was.mtimeMs !== now.mtimeMs || was.mode !== now.mode || was.ino !== now.ino) {
      changes.push({ path, action: 'modified', size: now.size, ...flag })
    }
  }
  for (const path of before.entries.keys()) {
    if (compared(path) && !after.entries.has(path)) changes.push({ path, action: 'deleted', ...flag })
  }
  return changes.sort((x, y) => walkOrder(x.path, y.path))
}

/** At most `max` changes; the last kept one says how many were left out. */
export function capChanges(changes: FileChange[], max = MAX_CHANGE_EVENTS): FileChange[] {
  if (changes.length <= max) return changes
  const kept = changes.slice(0, max)
  kept[max - 1] = { ...kept[max - 1]!, truncated: true, omitted: changes.length - max }
  return kept
}

/**
 * Keeps the last known state of a tree across tool calls, so each shell command is compared with
 * what the previous call left (one scan per command), and changes a background job makes between
 * commands are still reported, with the next command. write_file's own change is folded into the
 * known state with `record`, so the next scan does not report it a second time.
 */
export class FileWatch {
  readonly #root: string
  readonly #options: ScanOptions
  #known: Manifest | null = null

  constructor(root: string, options: ScanOptions = {}) {
    this.#root = root
    this.#options = options
  }

  /** Forgets the known state: the next `changes` call starts from a fresh scan (a new task). */
  reset(): void {
    this.#known = null
  }

  /** Scans now when nothing is known yet (before a command runs). */
  async baseline(): Promise<void> {
    this.#known ??= await scanTree(this.#root, this.#options)
  }

  /** Scans, returns what changed since the known state, and keeps the new state. */
  async changes(): Promise<{ changes: FileChange[]; manifest: Manifest }> {
    const after = await scanTree(this.#root, this.#options)
    const changes = this.#known ? diffManifests(this.#known, after) : []
    this.#known = after
    return { changes, manifest: after }
  }

  /** Folds a change the agent made itself (write_file) into the known state. */
  async record(relPath: string): Promise<void> {
    if (!this.#known) return
    const st = await lstat(join(this.#root, relPath)).catch(() => null)
    if (st && !st.isDirectory()) this.#known.entries.set(relPath, { size: st.size, mtimeMs: st.mtimeMs, mode: st.mode, ino: st.ino })
  }
}
