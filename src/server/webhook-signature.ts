// Identity-provider webhooks are signed like Stripe/Svix webhooks: HMAC-SHA256 over
// `<timestamp>.<raw body>` with a shared secret, hex-encoded as `v1=<hex>` (several
// comma-separated signatures allowed, for secret rotation). Stale timestamps are refused so a
// captured delivery cannot be replayed later; the delivery id is remembered for the same window.
import { createHmac, timingSafeEqual } from 'node:crypto'

export const WEBHOOK_HEADERS = {
  id: 'corral-webhook-id',
  timestamp: 'corral-webhook-timestamp',
  signature: 'corral-webhook-signature',
} as const

export const WEBHOOK_TOLERANCE_SECONDS = 5 * 60

export function signWebhook(secret: string, timestamp: number | string, rawBody: string): string {
  return `v1=${createHmac('sha256', secret).update(`${timestamp}.${rawBody}`, 'utf8').digest('hex')}`
}

export type WebhookCheck = { ok: true; timestamp: number } | { ok: false; reason: string }

export function verifyWebhookSignature(opts: {
  secret: string
  rawBody: string
  timestamp: string | undefined
  signature: string | undefined
  nowSeconds?: number
  toleranceSeconds?: number
}): WebhookCheck {
  const now = opts.nowSeconds ?? Math.floor(Date.now() / 1000)
  const tolerance = opts.toleranceSeconds ?? WEBHOOK_TOLERANCE_SECONDS
  if (!opts.timestamp || !/^\d{1,12}$/.test(opts.timestamp)) return { ok: false, reason: 'missing or malformed timestamp' }
  const ts = Number(opts.timestamp)
  if (Math.abs(now - ts) > tolerance) return { ok: false, reason: 'timestamp outside the tolerance window' }
  if (!opts.signature) return { ok: false, reason: 'missing signature' }
  const expected = Buffer.from(signWebhook(opts.secret, opts.timestamp, opts.rawBody))
  const matches = opts.signature
    .split(',')
    .map((s) => Buffer.from(s.trim()))
    .some((candidate) => candidate.length === expected.length && timingSafeEqual(candidate, expected))
  return matches ? { ok: true, timestamp: ts } : { ok: false, reason: 'signature mismatch' }
}
