// Errors raised by the /v1 client. An API error keeps the spec's envelope whole (code, message,
// request_id, details) so the CLI base renders it as one line with the request id; callers branch on
// `envelope.code` or `status`, never on message text.

import type { ErrorBody } from '../contract/index.js'

export type ErrorEnvelope = ErrorBody

/** A non-2xx answer from the API. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly envelope: ErrorEnvelope,
    /** Seconds from `Retry-After`, when the server sent one (429). */
    readonly retryAfter?: number,
  ) {
    super(envelope.message)
    this.name = 'ApiError'
  }

  get code(): string {
    return this.envelope.code
  }
}

/** The API could not be reached at all (DNS, refused connection, TLS, timeout). */
export class ApiConnectionError extends Error {
  readonly code = 'connection_failed'
  constructor(apiUrl: string, cause: unknown) {
    super(`cannot reach the corral API at ${apiUrl}: ${describeCause(cause)}`, { cause })
    this.name = 'ApiConnectionError'
  }
}

function describeCause(cause: unknown): string {
  // fetch wraps socket errors as `TypeError: fetch failed` with the system error in `cause`.
  const inner = (cause as { cause?: { code?: string; message?: string } })?.cause
  if (inner?.code) return inner.code
  if (inner?.message) return inner.message
  return cause instanceof Error ? cause.message : String(cause)
}

/**
 * Turns a non-2xx response into an ApiError. A body that is not the envelope (a proxy's HTML page,
 * an empty 502) still yields one readable envelope so the CLI never prints a raw page.
 */
export async function apiErrorFrom(response: Response): Promise<ApiError> {
  const text = await response.text().catch(() => '')
  let envelope: ErrorEnvelope | undefined
  try {
    const body = JSON.parse(text) as { error?: Partial<ErrorEnvelope> }
    if (body?.error && typeof body.error.code === 'string' && typeof body.error.message === 'string') {
      envelope = body.error as ErrorEnvelope
    }
  } catch {
    // not JSON: fall through to the synthesized envelope below
  }
  const requestId = response.headers.get('x-request-id') ?? undefined
  envelope ??= {
    code: `http_${response.status}`,
    message: `unexpected HTTP ${response.status} ${response.statusText || ''}`.trimEnd() + ` from ${new URL(response.url || 'http://unknown').pathname}`,
    ...(requestId ? { request_id: requestId } : {}),
  }
  if (!envelope.request_id && requestId) envelope = { ...envelope, request_id: requestId }
  return new ApiError(response.status, envelope, parseRetryAfter(response.headers.get('retry-after')))
}

/** `Retry-After` is either delta-seconds or an HTTP date (RFC 9110 §10.2.3). */
export function parseRetryAfter(value: string | null): number | undefined {
  if (value === null || value.trim() === '') return undefined
  if (/^\d+$/.test(value.trim())) return Number(value.trim())
  const at = Date.parse(value)
  if (Number.isNaN(at)) return undefined
  return Math.max(0, Math.ceil((at - Date.now()) / 1000))
}
