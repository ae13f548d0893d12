import { readFileSync } from 'node:fs'
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import { AUTH_PROVIDERS, isAuthProvider } from '../../src/policy/index.js'

describe('AUTH_PROVIDERS', () => {
  const entries = Object.entries(AUTH_PROVIDERS)
  const count = (family: string) => entries.filter(([, p]) => p.family === family).length

  it('has the families the spec names: 2 OAuth, 22 static-token, 4 basic, 1 query-key', () => {
    expect([count('oauth'), count('static_token'), count('basic'), count('query_key')]).toEqual([2, 22, 4, 1])
  })

  it('places tokens as the vendors document', () => {
    expect(AUTH_PROVIDERS.anthropic.placement).toEqual({ kind: 'header', name: 'x-api-key' })
    expect(AUTH_PROVIDERS.openai.placement).toEqual({ kind: 'header', name: 'authorization', scheme: 'Bearer' })
    expect(AUTH_PROVIDERS.datadog.placement).toEqual({ kind: 'header', name: 'dd-api-key' })
    expect(AUTH_PROVIDERS.pagerduty.placement).toEqual({ kind: 'header', name: 'authorization', scheme: 'Token token=' })
    expect(AUTH_PROVIDERS['google-maps'].placement).toEqual({ kind: 'query', param: 'key' })
    expect(AUTH_PROVIDERS.twilio.placement).toEqual({ kind: 'basic' })
    for (const [, p] of entries) {
      expect(p.docs).toMatch(/^https:\/\//)
      if (p.placement.kind === 'header') expect(p.placement.name).toBe(p.placement.name.toLowerCase())
    }
  })

  it('is a closed list, documented in docs/policy.md', () => {
    expect(isAuthProvider('github')).toBe(true)
    expect(isAuthProvider('toString')).toBe(false)
    const docs = readFileSync(path.join(import.meta.dirname, '../../docs/policy.md'), 'utf8')
    for (const [slug] of entries) expect(docs).toContain(`\`${slug}\``)
  })
})
