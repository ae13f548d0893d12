import { describe, expect, it } from 'vitest'
import { ApiKeyCache } from '../../src/server/auth/key-cache.js'
import { API_KEY_PREFIX, displayPrefix, generateApiKeySecret, hashApiKeySecret, looksLikeApiKey } from '../../src/server/auth/api-key-secret.js'

const key = { id: 'key_1', org_id: 'org_1', label: 'ci', prefix: 'crl_abcd…wxyz', permission_set: 'read_only' }

describe(ApiKeyCache.name, () => {
  it('expires entries after the TTL', () => {
    let now = 0
    const cache = new ApiKeyCache({ ttlMs: 1000, now: () => now })
    cache.set('h', key)
    expect(cache.get('h')).toEqual(key)
    now = 1000
    expect(cache.get('h')).toBeUndefined()
  })

  it('evicts by key id, and a lookup racing the revoke cannot re-insert the key', () => {
    const cache = new ApiKeyCache({ ttlMs: 1000, now: () => 0 })
    cache.set('h', key)
    cache.evict('key_1')
    expect(cache.get('h')).toBeUndefined()
    cache.set('h', key)
    expect(cache.get('h')).toBeUndefined()
  })

  it('holds at most maxEntries', () => {
    const cache = new ApiKeyCache({ maxEntries: 1 })
    cache.set('a', key)
    cache.set('b', { ...key, id: 'key_2' })
    expect(cache.get('a')).toBeUndefined()
    expect(cache.get('b')?.id).toBe('key_2')
  })
})

describe('api key secrets', () => {
  it('are prefixed, unique, hashed with SHA-256 and displayed without most of the secret', () => {
    const a = generateApiKeySecret()
    const b = generateApiKeySecret()
    expect(a.startsWith(API_KEY_PREFIX)).toBe(true)
    expect(a).not.toBe(b)
    expect(a.length).toBeGreaterThanOrEqual(40)
    expect(hashApiKeySecret(a)).toMatch(/^[0-9a-f]{64}$/)
    expect(hashApiKeySecret(a)).not.toBe(hashApiKeySecret(b))
    const shown = displayPrefix(a)
    expect(shown.length).toBeLessThan(20)
    expect(a.includes(shown.replace('…', ''))).toBe(false)
    expect(looksLikeApiKey(a)).toBe(true)
    expect(looksLikeApiKey('eyJhbGciOi')).toBe(false)
  })

  it('a revoke waits for its own echo: heard() evicts and wakes the waiter, a missing echo times out', async () => {
    const cache = new ApiKeyCache()
    cache.set('h1', { id: 'key_1', org_id: 'org_1', label: 'k', prefix: 'crl_1', permission_set: 'read_only' })
    let woke = false
    const waiting = cache.echo('key_1', 60_000).then(() => { woke = true })
    await Promise.resolve()
    expect(woke).toBe(false)
    cache.heard('key_1')
    await waiting
    expect(woke).toBe(true)
    expect(cache.get('h1')).toBeUndefined()
    // No echo ever comes for key_2: the wait ends on its own (a hang here fails the test).
    await expect(cache.echo('key_2', 20)).resolves.toBeUndefined()
  })
})
