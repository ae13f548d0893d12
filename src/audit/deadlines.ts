// Callers waiting for durability, oldest first: a sweep refuses those past the deadline (the
// database is away and the journal cannot help), so no caller of emit() hangs; their events stay
// queued and are written later. Per event (a timestamp and a push), so even a journal write that
// hangs times out each caller on its own deadline. The sweep timer runs only while someone waits.

/** What a waiting caller needs: settle functions (cleared once settled) and its start time. */
export interface Waiter {
  resolve?: (value: never) => void
  reject?: (err: Error) => void
  /** Date.now() when it started waiting. */
  at?: number
}

export class Deadlines<T extends Waiter> {
  readonly #timeoutMs: number
  readonly #expire: (it: T) => void
  #waiting: T[] = []
  #sweeper: NodeJS.Timeout | undefined

  /** `expire` settles a caller past `timeoutMs` (it must clear resolve/reject). */
  constructor(timeoutMs: number, expire: (it: T) => void) {
    this.#timeoutMs = timeoutMs
    this.#expire = expire
  }

  watch(it: T): void {
    it.at = Date.now()
    this.#waiting.push(it)
    if (!this.#sweeper) {
      this.#sweeper = setInterval(() => this.#sweep(), Math.min(250, this.#timeoutMs))
      this.#sweeper.unref()
    }
  }

  #sweep(): void {
    const now = Date.now()
    const waiting = this.#waiting
    let i = 0
    for (; i < waiting.length; i++) {
      const it = waiting[i]
      if (!it.resolve) continue
      if (now - it.at! < this.#timeoutMs) break
      this.#expire(it)
    }
    this.#waiting = waiting.slice(i).filter((it) => it.resolve)
    if (this.#waiting.length === 0) {
      clearInterval(this.#sweeper)
      this.#sweeper = undefined
    }
  }
}
