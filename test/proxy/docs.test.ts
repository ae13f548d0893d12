// Docs and code agree (STYLE.md §6): every deny reason, floored reason and transforms_failed value
// is explained in docs/proxy.md, and every auth provider has its placement in docs/credentials.md.
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { DENY_REASONS, FLOORED_REASONS, TRANSFORM_FAILURES } from '../../src/contract/index.js'
import { AUTH_PROVIDERS } from '../../src/policy/auth-providers.js'
import { DENY_MESSAGES } from '../../src/proxy/decision.js'

const proxyDoc = readFileSync(new URL('../../docs/proxy.md', import.meta.url), 'utf8')
const credDoc = readFileSync(new URL('../../docs/credentials.md', import.meta.url), 'utf8')

describe('proxy docs', () => {
  it.each([...DENY_REASONS, ...FLOORED_REASONS, ...TRANSFORM_FAILURES])('documents %s', (code) => {
    expect(proxyDoc).toContain(`\`${code}\``)
  })
  it('has a deny message for every reason and no other', () => {
    expect(Object.keys(DENY_MESSAGES).sort()).toEqual([...DENY_REASONS].sort())
  })
  it.each(Object.keys(AUTH_PROVIDERS))('documents the placement of provider %s', (slug) => {
    expect(credDoc).toContain(`| \`${slug}\` |`)
  })
})
