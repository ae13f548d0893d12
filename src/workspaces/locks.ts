// One lock per workspace: everything that changes a workspace runs under it, in order (the
// reconcile step, a task's start and end, a stop, a claim's hand-over). A failed holder never
// blocks the next one.

export class WorkspaceLocks {
  readonly #tails = new Map<string, Promise<unknown>>()

  /** Runs `fn` once every earlier holder of `id`'s lock has settled; resolves with its result. */
  run<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.#tails.get(id) ?? Promise.resolve()
    const next = prev.catch(() => {}).then(fn)
    const tail = next.catch(() => {})
    this.#tails.set(id, tail)
    void tail.then(() => {
      if (this.#tails.get(id) === tail) this.#tails.delete(id)
    })
    return next
  }

  /** Settles when every holder queued so far has (close waits for them). */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.#tails.values()])
  }
}
