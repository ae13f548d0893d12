// The verified-token cache in CapabilityTokens.check: a token verified once is answered from
// memory, but a cached token still expires (with the expired attribution) and a forged one is
// never taken for a cached one.
import { randomBytes } from 'node:crypto'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { CapabilityTokens } from '../../src/secrets/index.js'

describe('capability token cache', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it('answers a verified token again, then reports it expired once past exp plus tolerance', async () => {
    vi.useFakeTimers({ toFake: ['Date'] })
    const tokens = new CapabilityTokens(new Uint8Array(randomBytes(32)))
    const { token } = await tokens.mint({ org_id: 'org_1', workspace_id: 'ws_1', task_id: 'tsk_1' }, 60)
    const first = await tokens.check(`Bearer ${token}`)
    expect(first).toEqual({ ok: true, claims: expect.objectContaining({ org_id: 'org_1', workspace_id: 'ws_1', task_id: 'tsk_1' }) })
    expect(await tokens.check(`Bearer ${token}`)).toEqual(first)
    vi.setSystemTime(Date.now() + 64_000) // inside the 5 s tolerance
    expect((await tokens.check(`Bearer ${token}`)).ok).toBe(true)
    vi.setSystemTime(Date.now() + 3_000) // past it
    expect(await tokens.check(`Bearer ${token}`)).toEqual({ ok: false, reason: 'invalid_token', expired: { org_id: 'org_1', workspace_id: 'ws_1' } })
  })

  it('a forged variant of a cached token is still refused', async () => {
    const tokens = new CapabilityTokens(new Uint8Array(randomBytes(32)))
    const { token } = await tokens.mint({ org_id: 'org_1', workspace_id: 'ws_1' }, 60)
    expect((await tokens.check(`Bearer ${token}`)).ok).toBe(true)
    const forged = token.slice(0, -4) + (token.endsWith('AAAA') ? 'BBBB' : 'AAAA')
    expect(await tokens.check(`Bearer ${forged}`)).toEqual({ ok: false, reason: 'invalid_token' })
    const other = new CapabilityTokens(new Uint8Array(randomBytes(32)))
    expect(await other.check(`Bearer ${token}`)).toEqual({ ok: false, reason: 'invalid_token' })
  })
})
