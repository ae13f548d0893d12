// gRPC over the proxy: a request is gRPC when its content-type is `application/grpc` (or a
// `+proto`/`+json` variant) and it arrived over HTTP/2. Its status travels in trailers
// (`grpc-status`, `grpc-message`), so the row takes them from the upstream's trailers (or from
// the headers of a trailers-only answer), and a deny is answered the gRPC way: a trailers-only
// response, HTTP 200, with a status a gRPC client shows and a message naming the reason
// (docs/proxy.md "gRPC").
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { ServerHttp2Stream } from 'node:http2'
import type { DecisionContext, PolicyDenial } from './decision.js'
import { DENY_MESSAGES } from '../contract/index.js'

/** gRPC status codes the proxy answers with (grpc/doc/statuscodes.md). */
export const GRPC = Object.freeze({ INVALID_ARGUMENT: 3, PERMISSION_DENIED: 7, RESOURCE_EXHAUSTED: 8, INTERNAL: 13, UNAVAILABLE: 14, UNAUTHENTICATED: 16 })

const GRPC_CONTENT_TYPE = /^application\/grpc(?:[+;]|$)/i

/** An HTTP/2 request with a gRPC content-type (the compat request of node:http2 is read as an IncomingMessage). */
export function isGrpc(req: IncomingMessage): boolean {
  if (req.httpVersionMajor !== 2) return false
  const ct = req.headers['content-type']
  return typeof ct === 'string' && GRPC_CONTENT_TYPE.test(ct)
}

/** The gRPC code for a deny: what the agent can do about it, as its HTTP status says. */
export function grpcCodeFor(denial: PolicyDenial): number {
  const s = denial.status
  if (s === 401 || s === 407) return GRPC.UNAUTHENTICATED
  if (s === 413 || s === 429) return GRPC.RESOURCE_EXHAUSTED
  if (s === 400) return GRPC.INVALID_ARGUMENT
  if (s === 502 || s === 503) return GRPC.UNAVAILABLE
  if (s >= 500) return GRPC.INTERNAL
  return GRPC.PERMISSION_DENIED
}

/** The message a gRPC client shows for a deny: the reason first, then the sentence for the agent. */
export function grpcMessageFor(denial: PolicyDenial): string {
  return `corral policy denied (${denial.reason}): ${DENY_MESSAGES[denial.reason]}`
}

/** Notes on the row the gRPC status the client gets for this deny (before the row is recorded). */
export function noteGrpcDeny(ctx: DecisionContext, denial: PolicyDenial): void {
  ctx.grpcStatus = grpcCodeFor(denial)
  ctx.grpcMessage = grpcMessageFor(denial)
}

/** Notes `grpc-status`/`grpc-message` from a header or trailer map, when present. */
export function noteGrpcStatus(ctx: DecisionContext, fields: Record<string, string | string[] | undefined> | undefined): void {
  if (!fields) return
  const status = first(fields['grpc-status'])
  if (status === undefined || !/^\d{1,2}$/.test(status)) return
  ctx.grpcStatus = Number(status)
  const message = first(fields['grpc-message'])
  if (message !== undefined) ctx.grpcMessage = decodeGrpcMessage(message).slice(0, 512)
}

/**
 * Answers a denied gRPC request with a trailers-only response (one HEADERS frame that ends the
 * stream): `:status 200`, `grpc-status`, `grpc-message` (percent-encoded as the gRPC spec says),
 * and the proxy's `x-corral-deny-reason`.
 */
export function sendGrpcDeny(res: ServerResponse, denial: PolicyDenial): void {
  const stream = (res as unknown as { stream?: ServerHttp2Stream }).stream
  if (!stream || stream.destroyed || stream.headersSent) {
    res.destroy()
    return
  }
  const headers: Record<string, string | number> = {
    ':status': 200,
    'content-type': 'application/grpc',
    'grpc-status': String(grpcCodeFor(denial)),
    'grpc-message': encodeGrpcMessage(grpcMessageFor(denial)),
    'x-corral-deny-reason': denial.reason,
  }
  if (typeof denial.detail.retry_after_s === 'number') headers['retry-after'] = String(denial.detail.retry_after_s)
  stream.respond(headers, { endStream: true })
}

/** gRPC's Percent-Encoded: bytes outside printable ASCII, and `%`, as %XX of their UTF-8. */
export function encodeGrpcMessage(s: string): string {
  let out = ''
  for (const byte of Buffer.from(s, 'utf8')) {
    out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`
  }
  return out
}

function decodeGrpcMessage(s: string): string {
  try {
    return decodeURIComponent(s)
  } catch {
    return s
  }
}

function first(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v
}
