// Transport violations on the proxy port: bytes that are not HTTP/1.1, request heads over the
// size limit, heads or bodies that arrive too slowly, a CONNECT target that is not host:port, a
// TLS handshake of garbage inside a tunnel. They never reach the phases, so they are answered
// here with a bare status (400 / 408 / 431, or a closed connection) and recorded in one row each
// in the platform scope (or the tunnel's org when its token verified). Such rows are cheap for an
// attacker to cause, so they are rate limited: past `transportRowsPerSecond` they are only
// counted, and the count rides on the next row that is written (`detail.suppressed`). The 407
// challenge to a CONNECT without credentials is answered here too, its rows bounded the same way.
import type { Socket } from 'node:net'
import { DecisionContext, attributeToken, deny, denyBody, type PolicyDenial } from './decision.js'
import { terminal, type TerminalOutcome } from './phases/terminal.js'
import type { ProxyCore } from './request-state.js'
import type { TokenCheck } from '../secrets/index.js'
import { RowAllowance } from './row-allowance.js'
import { PROXY_CHALLENGE, proxyChallenge } from './token.js'

/** What the front does with one transport error: the status it answers (none: just close) and the row's denial. */
export interface TransportVerdict {
  status?: 400 | 408 | 431
  denial?: PolicyDenial
}

const STATUS_TEXT = { 400: 'Bad Request', 403: 'Forbidden', 407: 'Proxy Authentication Required', 408: 'Request Timeout', 429: 'Too Many Requests', 431: 'Request Header Fields Too Large', 503: 'Service Unavailable' } as const

/**
 * Maps a parser or socket error of Node's HTTP server to a verdict. A client that left (reset,
 * EOF in the middle of a head) gets no answer and no row: there was no request to decide on.
 */
export function classifyClientError(err: NodeJS.ErrnoException, core: ProxyCore): TransportVerdict {
  const code = typeof err?.code === 'string' ? err.code : 'error'
  if (code === 'HPE_HEADER_OVERFLOW') {
    return { status: 431, denial: deny('limit_exceeded', { limit: 'header_bytes', max: core.limits.maxHeaderBytes, transport: code }, 431) }
  }
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return { status: 408, denial: deny('limit_exceeded', { limit: 'request_timeout', max: core.limits.requestTimeoutMs, headers_max: core.limits.headersTimeoutMs, transport: code }, 408) }
  }
  if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'HPE_INVALID_EOF_STATE' || code === 'ERR_STREAM_DESTROYED') return {}
  if (code.startsWith('HPE_')) return { status: 400, denial: deny('no_scheme', { transport: code.toLowerCase() }, 400) }
  // TLS failures inside a tunnel and anything unforeseen: close, and record what it was.
  return { denial: deny('no_scheme', { transport: /SSL|TLS/.test(code) ? 'tls_handshake_failed' : 'connection_error' }, 400) }
}

/** Writes a bare HTTP/1.1 answer and closes the connection (or just closes an unwritable one). */
export type RawStatus = keyof typeof STATUS_TEXT

export function endRaw(socket: Socket, status: RawStatus, body = '', contentType = 'text/plain', extra: Record<string, string> = {}): void {
  if (!socket.writable || socket.destroyed) {
    socket.destroy()
    return
  }
  const headers = Object.entries({ 'content-type': contentType, 'content-length': String(Buffer.byteLength(body)), connection: 'close', ...extra })
    .map(([k, v]) => `${k}: ${v}\r\n`).join('')
  socket.end(`HTTP/1.1 ${status} ${STATUS_TEXT[status]}\r\n${headers}\r\n${body}`)
  // end() waits for the peer to read; a peer that never does must not keep the socket.
  socket.setTimeout(5_000, () => socket.destroy())
}

/** Writer of rows that are cheap to cause, through a RowAllowance (row-allowance.ts). */
export class TransportRows {
  readonly #core: ProxyCore
  readonly #allowance: RowAllowance

  constructor(core: ProxyCore, allowance = new RowAllowance(core.limits.transportRowsPerSecond, () => core.counters.transportRowsSuppressed++)) {
    this.#core = core
    this.#allowance = allowance
  }

  /**
   * Writes the row unless the rate limit is spent; resolves once the sink took it (or refused it),
   * with the sink's outcome (undefined: only counted).
   */
  async record(denial: PolicyDenial, check: TokenCheck | undefined, where: { destination?: string; method?: string } = {}): Promise<TerminalOutcome | undefined> {
    const suppressed = this.#allowance.take()
    if (suppressed === undefined) return undefined
    const ctx = new DecisionContext({ destination: where.destination ?? '', method: where.method ?? '', path: '' })
    if (check) attributeToken(ctx, check.ok ? check : { ok: false, reason: check.reason })
    ctx.denial = deny(denial.reason, suppressed ? { ...denial.detail, suppressed } : denial.detail, denial.status)
    return terminal(this.#core, ctx)
  }
}

/**
 * Records a refusal taken off the HTTP server (upgrade, CONNECT in a tunnel, a tunnel over its
 * limit), then answers it on the raw socket with its deny body: the row first, and when the audit
 * log refused the row, `audit_unavailable` (503, Retry-After) instead.
 */
export async function recordThenRefuse(core: ProxyCore, ctx: DecisionContext, socket: Socket, status: RawStatus): Promise<void> {
  const out = await terminal(core, ctx)
  const denial = out.recorded ? ctx.denial! : deny('audit_unavailable', { retry_after_s: out.retryAfterS }, 503)
  const extra: Record<string, string> = { 'x-corral-deny-reason': denial.reason }
  if (!out.recorded) extra['retry-after'] = String(out.retryAfterS)
  endRaw(socket, out.recorded ? status : 503, denyBody(ctx, denial), 'application/json', extra)
}

/**
 * Answers a CONNECT without a credential the proxy can read: `407` with a `Basic` challenge, so a
 * client that waits for one (git, curl's --proxy-anyauth) retries with its token on a new
 * connection. Its row names no org (nothing was presented that could) and is rate limited like a
 * transport violation, in `rows` (the challenges' own allowance, `core.challengeRows`, shared with
 * the 407s to plain requests): a bare CONNECT costs nothing to send
 * (docs/proxy.md "Unattributed decisions"). A row the audit log refuses turns the answer into
 * audit_unavailable, as for every request.
 */
export async function challenge(rows: TransportRows, check: TokenCheck, host: string, socket: Socket): Promise<void> {
  let denial = proxyChallenge(check)
  const out = await rows.record(denial, check, { destination: host, method: 'CONNECT' })
  const headers: Record<string, string> = { 'proxy-authenticate': PROXY_CHALLENGE }
  if (out && !out.recorded) {
    denial = deny('audit_unavailable', { retry_after_s: out.retryAfterS }, 503)
    headers['retry-after'] = String(out.retryAfterS)
    delete headers['proxy-authenticate']
  }
  headers['x-corral-deny-reason'] = denial.reason
  const ctx = new DecisionContext({ destination: host, method: 'CONNECT', path: '' })
  endRaw(socket, denial.status === 503 ? 503 : 407, denyBody(ctx, denial), 'application/json', headers)
}
