// A per-key token bucket (spec: 429 with `Retry-After`, integer seconds until the bucket refills).
// In memory, per process: with several replicas each enforces its own bucket, so the effective
// limit is replicas × capacity (docs/decisions-server.md). Reused later for task-create limits.
import type { FastifyReply } from 'fastify'
import { apiError } from '../contract/index.js'

export interface TokenBucketOptions {
  /** Bucket size: the burst a key may spend at once. */
  capacity: number
  /** Tokens added per second. */
  refillPerSecond: number
  /** Buckets kept before the least recently used is dropped (a dropped bucket is simply full again). */
  maxKeys?: number
  now?: () => number
}

export type TakeResult = { ok: true; remaining: number } | { ok: false; retryAfterSeconds: number }

export class TokenBucketLimiter {
  readonly #opts: Readonly<Required<TokenBucketOptions>>
  readonly #buckets = new Map<string, { tokens: number; at: number }>()

  constructor(opts: TokenBucketOptions) {
    if (!(opts.capacity >= 1) || !(opts.refillPerSecond > 0)) throw new RangeError('token bucket needs capacity >= 1 and refillPerSecond > 0')
    this.#opts = Object.freeze({ maxKeys: 100_000, now: () => Date.now(), ...opts })
  }

  take(key: string, cost = 1): TakeResult {
    const now = this.#opts.now()
    const { capacity, refillPerSecond } = this.#opts
    const prev = this.#buckets.get(key)
    let tokens = capacity
    if (prev) {
      tokens = Math.min(capacity, prev.tokens + ((now - prev.at) / 1000) * refillPerSecond)
      this.#buckets.delete(key) // re-insert below keeps the Map in LRU order
    } else if (this.#buckets.size >= this.#opts.maxKeys) {
      const oldest = this.#buckets.keys().next().value
      if (oldest !== undefined) this.#buckets.delete(oldest)
    }
    if (tokens >= cost) {
      this.#buckets.set(key, { tokens: tokens - cost, at: now })
      return { ok: true, remaining: Math.floor(tokens - cost) }
    }
    this.#buckets.set(key, { tokens, at: now })
    return { ok: false, retryAfterSeconds: Math.max(1, Math.ceil((cost - tokens) / refillPerSecond)) }
  }
}

/**
 * Takes a token for `key` or refuses the request: sets `Retry-After` and throws 429
 * `rate_limited` (rendered as the envelope). Use from a route or hook, e.g. per-org task create:
 * `enforceRateLimit(taskLimiter, principal.org.id, reply)`.
 */
export function enforceRateLimit(limiter: TokenBucketLimiter, key: string, reply: FastifyReply, cost = 1): void {
  const taken = limiter.take(key, cost)
  if (taken.ok) return
  reply.header('retry-after', String(taken.retryAfterSeconds))
  throw apiError('rate_limited', `rate limit exceeded; retry in ${taken.retryAfterSeconds}s`, { retry_after_seconds: taken.retryAfterSeconds })
}
