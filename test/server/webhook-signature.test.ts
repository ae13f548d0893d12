import { describe, expect, it } from 'vitest'
import { signWebhook, verifyWebhookSignature } from '../../src/server/webhook-signature.js'

describe('webhook signatures', () => {
  const secret = 'whsec_test'
  const body = '{"invitation_id":"inv_1"}'
  const now = 1_800_000_000

  it('accepts a fresh, correctly signed body', () => {
    const sig = signWebhook(secret, now, body)
    expect(verifyWebhookSignature({ secret, rawBody: body, timestamp: String(now), signature: sig, nowSeconds: now + 10 })).toEqual({ ok: true, timestamp: now })
  })

  it('accepts any of several signatures (rotation)', () => {
    const sig = `v1=deadbeef, ${signWebhook(secret, now, body)}`
    expect(verifyWebhookSignature({ secret, rawBody: body, timestamp: String(now), signature: sig, nowSeconds: now }).ok).toBe(true)
  })

  it.each([
    ['tampered body', { rawBody: body.replace('1', '2') }],
    ['wrong secret', { secret: 'other' }],
    ['stale timestamp', { nowSeconds: now + 301 }],
    ['future timestamp', { nowSeconds: now - 301 }],
    ['missing signature', { signature: undefined }],
    ['malformed timestamp', { timestamp: '12abc' }],
  ])('refuses a %s', (_name, override) => {
    const base = { secret, rawBody: body, timestamp: String(now), signature: signWebhook(secret, now, body), nowSeconds: now }
    expect(verifyWebhookSignature({ ...base, ...override }).ok).toBe(false)
  })
})
