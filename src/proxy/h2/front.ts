// HTTP/2 inside an intercepted tunnel. The CONNECT front (front.ts) offers `h2` by ALPN next to
// `http/1.1`; a tunnel that negotiated `h2` is handed to a never-listening node:http2 server
// whose every stream is one request through the same phase runner (its own decision row), read
// through node's compatibility request/response (they stand in for IncomingMessage and
// ServerResponse). Requests that arrived over h2 are sent upstream over h2 when the upstream
// offers it (upstream.ts), so gRPC works end to end; trailers are relayed (../trailers.ts).
//
// Bounds (docs/proxy.md "HTTP/2"): SETTINGS_MAX_CONCURRENT_STREAMS (limits.maxStreamsPerConnection),
// SETTINGS_MAX_HEADER_LIST_SIZE (limits.maxHeaderBytes, which bounds HPACK bombs and CONTINUATION
// floods: nghttp2 resets a stream whose decoded header list goes past it), header pairs, SETTINGS
// entries, invalid frames and refused streams per session (past them the session is closed with
// GOAWAY), and streams the client resets: past RESETS_PER_SECOND in one second (the rapid-reset
// class), GOAWAY ENHANCE_YOUR_CALM, with one row. Per workspace, streams are requests in flight
// (limits.maxInFlightPerWorkspace) and h2 connections are tunnels (maxConnectionsPerWorkspace).
// Extended CONNECT (RFC 8441) is not advertised, and a CONNECT stream is refused with a row.
import { constants, createServer, type Http2Server, type Http2ServerRequest, type Http2ServerResponse, type Http2Session, type ServerHttp2Session } from 'node:http2'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { TLSSocket } from 'node:tls'
import { targetPath } from '../../policy/index.js'
import { normalizeHost } from '../ca.js'
import { DecisionContext, attributeToken, deny } from '../decision.js'
import { terminal } from '../phases/terminal.js'
import type { Entry, ProxyCore, TunnelContext } from '../request-state.js'
import { runRequest } from '../runner.js'
import type { TransportRows } from '../transport.js'
import { noteGrpcDeny, isGrpc, sendGrpcDeny } from '../grpc.js'

/** Streams one client may reset in a second before its connection is closed (rapid reset, CVE-2023-44487). */
export const RESETS_PER_SECOND = 100
/** SETTINGS frames one client may send in a second before its connection is closed (SETTINGS flood, CVE-2019-9515). */
export const SETTINGS_PER_SECOND = 100
/** Header fields per request (node's default, named here because it is a bound we document). */
const MAX_HEADER_PAIRS = 128
/** Entries of one SETTINGS frame. */
const MAX_SETTINGS = 32
/** Frames nghttp2 finds invalid, per session, before it is closed. */
const MAX_INVALID_FRAMES = 100
/** Streams refused (over the concurrency limit) per session before it is closed. */
const MAX_REJECTED_STREAMS = 100
/** Memory nghttp2 may hold for one session (header tables, queued frames, unacknowledged SETTINGS), MB. */
const MAX_SESSION_MEMORY_MB = 10

/** A per-second count of one kind of frame a client can send cheaply and make the proxy work for. */
interface FrameRate {
  count: number
  windowStart: number
}

interface SessionState {
  tunnel: TunnelContext
  resets: FrameRate
  settings: FrameRate
  calmed: boolean
}

/** Runs a handler behind the front's error boundary (front.ts #guard). */
export type Guard = (p: Promise<unknown>, socket: TLSSocket) => void

export class H2Front {
  readonly #core: ProxyCore
  readonly #server: Http2Server
  readonly #transport: TransportRows
  readonly #guard: Guard
  readonly #sessions = new Map<ServerHttp2Session, SessionState>()
  readonly #sockets = new WeakMap<ServerHttp2Session, TLSSocket>()
  readonly #owned = new WeakSet<TLSSocket>()
  #next: { tunnel: TunnelContext; tls: TLSSocket } | undefined

  constructor(core: ProxyCore, transport: TransportRows, guard: Guard) {
    this.#core = core
    this.#transport = transport
    this.#guard = guard
    const L = core.limits
    this.#server = createServer({
      settings: { maxConcurrentStreams: L.maxStreamsPerConnection, maxHeaderListSize: L.maxHeaderBytes, enablePush: false, enableConnectProtocol: false },
      maxHeaderListPairs: MAX_HEADER_PAIRS,
      maxSettings: MAX_SETTINGS,
      maxSessionInvalidFrames: MAX_INVALID_FRAMES,
      maxSessionRejectedStreams: MAX_REJECTED_STREAMS,
      maxSessionMemory: MAX_SESSION_MEMORY_MB,
      peerMaxConcurrentStreams: L.maxStreamsPerConnection,
    })
    this.#server.on('session', (session: ServerHttp2Session) => this.#session(session))
    const onRequest = (req: Http2ServerRequest, res: Http2ServerResponse): void => {
      const tls = this.#sockets.get(req.stream.session as ServerHttp2Session)
      if (tls) this.#guard(this.#request(req, res), tls)
      else req.stream.close(constants.NGHTTP2_INTERNAL_ERROR)
    }
    this.#server.on('request', onRequest)
    // Without a listener node answers a CONNECT stream 405 by itself, and no row would say so.
    this.#server.on('connect', onRequest)
  }

  /** Takes a tunnel whose TLS negotiated `h2`: the http2 server reads its preface from here on. */
  accept(tls: TLSSocket, tunnel: TunnelContext): void {
    this.#owned.add(tls)
    this.#next = { tunnel, tls }
    // A TLSSocket made by hand (not by a tls.Server) keeps `secureConnecting` after its handshake,
    // and node:http2 would wait for a 'secureConnect' that never comes to a server socket: the
    // handshake is done ('secure' fired), so it is cleared.
    ;(tls as TLSSocket & { secureConnecting: boolean }).secureConnecting = false
    try {
      this.#server.emit('connection', tls)
    } finally {
      this.#next = undefined
    }
  }

  /** Whether this tunnel's socket was handed to HTTP/2 (the shutdown drain sends it GOAWAY instead of cutting it). */
  owns(tls: TLSSocket): boolean {
    return this.#owned.has(tls)
  }

  /** Open sessions (for the shutdown drain). */
  get open(): number {
    return this.#sessions.size
  }

  /** GOAWAY to every session: streams in flight may finish, no new ones are accepted. */
  drain(): void {
    for (const s of this.#sessions.keys()) if (!s.closed && !s.destroyed) s.close()
  }

  #session(session: ServerHttp2Session): void {
    const next = this.#next
    if (!next) {
      session.destroy()
      return
    }
    const now = Date.now()
    const state: SessionState = { tunnel: next.tunnel, resets: { count: 0, windowStart: now }, settings: { count: 0, windowStart: now }, calmed: false }
    this.#sessions.set(session, state)
    this.#sockets.set(session, next.tls)
    // A session error (a protocol violation nghttp2 caught, a reset socket) ends that session only.
    session.on('error', () => session.destroy())
    session.once('close', () => this.#sessions.delete(session))
    session.on('remoteSettings', () => this.#count(session, state, state.settings, SETTINGS_PER_SECOND, 'h2_settings', 'h2_settings_flood'))
    session.on('stream', (stream) => {
      // The first stream ends the wait for a first request (connectTimeoutMs); from here on the
      // tunnel's socket times out after idleTimeoutMs without a byte either way.
      next.tls.setTimeout(this.#core.limits.idleTimeoutMs)
      stream.on('aborted', () => this.#count(session, state, state.resets, RESETS_PER_SECOND, 'h2_stream_resets', 'h2_rapid_reset'))
    })
  }

  /**
   * Counts a cheap frame (a stream the client reset before its answer was complete, a SETTINGS
   * frame); past `max` in one second the session gets GOAWAY ENHANCE_YOUR_CALM and one row.
   */
  #count(session: Http2Session, state: SessionState, rate: FrameRate, max: number, limit: string, transport: string): void {
    const now = Date.now()
    if (now - rate.windowStart >= 1_000) {
      rate.windowStart = now
      rate.count = 0
    }
    if (++rate.count <= max || state.calmed) return
    state.calmed = true
    this.#core.counters.transportErrors++
    session.goaway(constants.NGHTTP2_ENHANCE_YOUR_CALM)
    // GOAWAY first, so the client learns why; then the connection goes with whatever it still queued.
    setImmediate(() => session.destroy())
    const tunnel = state.tunnel
    void this.#transport.record(deny('limit_exceeded', { limit, max, transport }, 429), tunnel.checked, { destination: tunnel.host })
  }

  /** One stream: a request through the phases, like a request of an HTTP/1.1 tunnel. */
  async #request(h2req: Http2ServerRequest, h2res: Http2ServerResponse): Promise<void> {
    this.#core.counters.requests++
    const state = this.#sessions.get(h2req.stream.session as ServerHttp2Session)
    const req = h2req as unknown as IncomingMessage
    const res = h2res as unknown as ServerResponse
    if (!state) {
      h2req.stream.close(constants.NGHTTP2_REFUSED_STREAM)
      return
    }
    const tunnel = state.tunnel
    if (h2req.method === 'CONNECT') {
      await this.#refuseConnect(req, res, tunnel)
      return
    }
    // `:authority` is h2's Host: the Host-versus-CONNECT-target checks read it as the Host header.
    const authority = h2req.authority
    if (req.headers.host === undefined && authority) req.headers.host = authority
    // h2 frames bodies by END_STREAM, not by a header: a stream that did not end with its HEADERS
    // carries a body of unknown length, which the phases know as `transfer-encoding` (the one
    // header an h2 client cannot send: nghttp2 refuses it as connection-specific).
    if (!h2req.stream.endAfterHeaders && req.headers['content-length'] === undefined) req.headers['transfer-encoding'] = 'chunked'
    const entry: Entry = { scheme: 'https', host: tunnel.host, port: tunnel.port, tunnel }
    await runRequest(this.#core, req, res, entry, targetPath(h2req.url ?? '/') || '/', undefined, 'h2')
  }

  /** CONNECT inside an h2 tunnel (plain or extended) would be a tunnel the phases cannot see: refused, with its row. */
  async #refuseConnect(req: IncomingMessage, res: ServerResponse, tunnel: TunnelContext): Promise<void> {
    const ctx = new DecisionContext({ destination: normalizeHost(String(req.headers[':authority'] ?? tunnel.host)).replace(/:\d+$/, ''), method: 'CONNECT', path: '' })
    ctx.protocol = 'h2'
    const check = tunnel.checked ?? (await tunnel.token)
    if (check.ok) attributeToken(ctx, check)
    const denial = deny('no_match', { message: 'CONNECT inside an intercepted HTTP/2 tunnel is not supported' })
    ctx.denial = denial
    if (isGrpc(req)) noteGrpcDeny(ctx, denial)
    const out = await terminal(this.#core, ctx)
    const answer = out.recorded ? denial : deny('audit_unavailable', { retry_after_s: out.retryAfterS }, 503)
    if (isGrpc(req)) return sendGrpcDeny(res, answer)
    if (res.headersSent) return void res.destroy()
    res.writeHead(answer.status, { 'x-corral-deny-reason': answer.reason, 'content-type': 'application/json' })
    res.end(JSON.stringify({ error: { code: 'policy_denied', reason: answer.reason } }))
  }
}
