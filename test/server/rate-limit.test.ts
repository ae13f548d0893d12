import { describe, expect, it } from 'vitest'
import { TokenBucketLimiter } from '../../src/server/rate-limit.js'

describe(TokenBucketLimiter.name, () => {
  it('spends the burst, refuses with a whole-second Retry-After, then refills', () => {
    let now = 0
    const limiter = new TokenBucketLimiter({ capacity: 2, refillPerSecond: 0.5, now: () => now })
    expect(limiter.take('a').ok).toBe(true)
    expect(limiter.take('a').ok).toBe(true)
    expect(limiter.take('a')).toEqual({ ok: false, retryAfterSeconds: 2 })
    expect(limiter.take('b').ok).toBe(true) // buckets are per key
    now = 2000
    expect(limiter.take('a').ok).toBe(true)
    expect(limiter.take('a').ok).toBe(false)
  })

  it('never holds more than maxKeys buckets', () => {
    const limiter = new TokenBucketLimiter({ capacity: 1, refillPerSecond: 1, maxKeys: 2, now: () => 0 })
    limiter.take('a')
    limiter.take('b')
    limiter.take('c') // evicts a: a's bucket starts full again
    expect(limiter.take('a').ok).toBe(true)
  })

  it('rejects nonsense options', () => {
    expect(() => new TokenBucketLimiter({ capacity: 0, refillPerSecond: 1 })).toThrow(RangeError)
  })
})
