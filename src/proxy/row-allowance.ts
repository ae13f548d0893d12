// A token bucket for decision rows that cost a client nothing to cause (transport violations,
// 407 challenges): past `perSecond` rows are only counted, and the count rides on the next row
// that is written (`detail.suppressed`), so every attempt is still accounted for.
export class RowAllowance {
  readonly #perSecond: number
  readonly #onSuppressed: () => void
  #tokens: number
  #refilledAt = Date.now()
  #suppressed = 0

  constructor(perSecond: number, onSuppressed: () => void) {
    this.#perSecond = perSecond
    this.#onSuppressed = onSuppressed
    this.#tokens = perSecond
  }

  /**
   * Asks to write one row: the number of rows only counted since the last one written (0 when
   * none), or undefined when this row is only counted.
   */
  take(now = Date.now()): number | undefined {
    const rate = this.#perSecond
    this.#tokens = Math.min(rate, this.#tokens + ((now - this.#refilledAt) / 1000) * rate)
    this.#refilledAt = now
    if (this.#tokens < 1) {
      this.#suppressed++
      this.#onSuppressed()
      return undefined
    }
    this.#tokens -= 1
    const suppressed = this.#suppressed
    this.#suppressed = 0
    return suppressed
  }
}
