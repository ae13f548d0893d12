// The journal's group commit (src/audit/journal.ts): events emitted in one turn of the event loop,
// or while a write is in flight, go to disk in one write. Per group, not per event: one text, one
// write, one promise, one pass that settles its callers. Groups are bounded in size.
//
// Writes start at most every `intervalMs`: a durable write costs about the same CPU whatever its
// size (the flush, and waking a threadpool thread and then the event loop), so at a few thousand
// events per second a write per event or two would be the largest single cost of the durable path
// (docs/reliability.md has the figures). A write that takes longer than the
// interval adds no wait; below 1/intervalMs events per second nothing waits at all.

import { MAX_GROUP_CHARS, type Journal, type Segment } from './journal.js'

/** What a group needs of an event: its journal line and that line's length. */
export interface GroupItem {
  line?: string
  size: number
}

export interface GroupCommitHandlers<T extends GroupItem> {
  /** The group is on disk in `seg`. */
  written(group: T[], seg: Segment): void
  /** The write failed (disk full, I/O error). */
  failed(group: T[], err: unknown): void
}

export class GroupCommit<T extends GroupItem> {
  readonly #journal: Journal
  readonly #on: GroupCommitHandlers<T>
  #gathering: T[] = []
  #writing = false
  #scheduled = false
  #lastStart = -Infinity
  readonly #intervalMs: number
  readonly #next = () => this.#write()

  constructor(journal: Journal, on: GroupCommitHandlers<T>, opts: { intervalMs?: number } = {}) {
    this.#journal = journal
    this.#on = on
    this.#intervalMs = Math.max(0, opts.intervalMs ?? 0)
  }

  add(it: T): void {
    this.#gathering.push(it)
    if (this.#writing || this.#scheduled) return
    // After this turn's I/O callbacks: every row they emit joins this write.
    this.#scheduled = true
    setImmediate(this.#next)
  }

  #write(): void {
    this.#scheduled = false
    if (this.#writing || this.#gathering.length === 0) return
    const now = performance.now()
    const wait = this.#lastStart + this.#intervalMs - now
    if (wait >= 0.5) {
      this.#scheduled = true
      setTimeout(this.#next, wait)
      return
    }
    this.#lastStart = now
    const all = this.#gathering
    let n = 0
    let chars = 0
    while (n < all.length && (n === 0 || chars + all[n].size < MAX_GROUP_CHARS)) chars += all[n++].size + 1
    const group = n === all.length ? all : all.slice(0, n)
    this.#gathering = n === all.length ? [] : all.slice(n)
    let text = ''
    for (const it of group) text += it.line + '\n'
    this.#writing = true
    this.#journal.write(text, group.length).then(
      (seg) => this.#on.written(group, seg),
      (err: unknown) => this.#on.failed(group, err),
    ).finally(() => {
      this.#writing = false
      this.#write()
    })
  }
}
