// A value now, or a promise of it only when it must wait: how the hot path (phases, budgets,
// tokens, activation) stays free of promises and microtasks when nothing waits, with each rule
// written once. Code on the hot path composes with these helpers instead of testing for a promise;
// where a step runs once per request and its continuation would be a closure made every time
// (runPhases, budget holds), it tests instead and makes the closure only on the waiting path.

/** A value now, or a promise of it when it must wait: the hot path's one spelling of "maybe async". */
export type MaybePromise<T> = T | Promise<T>

/** `f(v)`, without a promise when `v` is not one: no microtask when nothing waits. */
export function andThen<T, U>(v: MaybePromise<T>, f: (value: T) => MaybePromise<U>): MaybePromise<U> {
  return v instanceof Promise ? v.then(f) : f(v)
}

/**
 * `step` over `items` in order, synchronously while it answers without a promise; the first
 * defined answer (a denial) stops it. A throw or a rejection is the caller's.
 */
export function untilDenied<T, D>(items: readonly T[], step: (item: T) => MaybePromise<D | undefined>, from = 0): MaybePromise<D | undefined> {
  for (let i = from; i < items.length; i++) {
    const out = step(items[i]!)
    // The continuation is made apart: a closure over the loop's `i` here would cost a context per item.
    if (out instanceof Promise) return untilDeniedAfter(out, items, step, i + 1)
    if (out) return out
  }
  return undefined
}

function untilDeniedAfter<T, D>(out: Promise<D | undefined>, items: readonly T[], step: (item: T) => MaybePromise<D | undefined>, next: number): Promise<D | undefined> {
  return out.then((d) => d ?? untilDenied(items, step, next))
}
