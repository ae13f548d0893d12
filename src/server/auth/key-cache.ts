// The API-key verification cache: secret hash → key record, with a TTL, so most requests skip
// the store lookup. Revocation evicts by key id, here and (through the store's notify/listen) on
// every other replica, so a revoked secret gets 401 on its very next request.

export interface CachedKey {
  id: string
  org_id: string
  label: string
  prefix: string
  permission_set: string
  created_by_user_id?: string | null
}

export const KEY_REVOKED_CHANNEL = 'corral_api_key_revoked'

export class ApiKeyCache {
  readonly #ttlMs: number
  readonly #maxEntries: number
  readonly #now: () => number
  readonly #byHash = new Map<string, { key: CachedKey; expires: number }>()
  readonly #hashById = new Map<string, string>()
  /** Ids revoked recently: a lookup racing a revoke must not re-insert the dead key. */
  readonly #revoked = new Map<string, number>()

  constructor(opts: { ttlMs?: number; maxEntries?: number; now?: () => number } = {}) {
    this.#ttlMs = opts.ttlMs ?? 60_000
    this.#maxEntries = opts.maxEntries ?? 10_000
    this.#now = opts.now ?? (() => Date.now())
  }

  get(hash: string): CachedKey | undefined {
    const hit = this.#byHash.get(hash)
    if (!hit) return undefined
    if (hit.expires <= this.#now()) {
      this.#drop(hash, hit.key.id)
      return undefined
    }
    return hit.key
  }

  set(hash: string, key: CachedKey): void {
    const revokedAt = this.#revoked.get(key.id)
    if (revokedAt !== undefined && revokedAt + this.#ttlMs > this.#now()) return
    if (this.#byHash.size >= this.#maxEntries) {
      const [oldestHash, oldest] = this.#byHash.entries().next().value as [string, { key: CachedKey }]
      this.#drop(oldestHash, oldest.key.id)
    }
    this.#byHash.set(hash, { key, expires: this.#now() + this.#ttlMs })
    this.#hashById.set(key.id, hash)
  }

  readonly #echoWaiters = new Map<string, Set<() => void>>()

  /**
   * Resolves once this replica's own listener hears the revocation of `keyId` (or after
   * `timeoutMs`): the database delivers a notification to every listening replica at once, so a
   * revoke answered after its own echo has already reached the other replicas' connections.
   */
  echo(keyId: string, timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const waiters = this.#echoWaiters.get(keyId) ?? new Set()
      this.#echoWaiters.set(keyId, waiters)
      const done = (): void => {
        clearTimeout(timer)
        waiters.delete(done)
        if (waiters.size === 0 && this.#echoWaiters.get(keyId) === waiters) this.#echoWaiters.delete(keyId)
        resolve()
      }
      const timer = setTimeout(done, timeoutMs)
      timer.unref()
      waiters.add(done)
    })
  }

  /** The listener heard a revocation (here or on another replica): evicts it and wakes its echo waiters. */
  heard(keyId: string): void {
    this.evict(keyId)
    for (const done of [...(this.#echoWaiters.get(keyId) ?? [])]) done()
  }

  evict(keyId: string): void {
    this.#revoked.set(keyId, this.#now())
    const hash = this.#hashById.get(keyId)
    if (hash !== undefined) this.#drop(hash, keyId)
    // Forget old tombstones so the map stays small.
    for (const [id, at] of this.#revoked) if (at + this.#ttlMs <= this.#now()) this.#revoked.delete(id)
  }

  #drop(hash: string, keyId: string): void {
    this.#byHash.delete(hash)
    this.#hashById.delete(keyId)
  }
}
