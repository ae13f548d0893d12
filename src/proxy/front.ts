// The front: an HTTP forward proxy. Absolute-URI requests are plain HTTP; `CONNECT host:port`
// tunnels are intercepted: the proxy answers 200, terminates TLS with a leaf minted for the SNI
// host from the corral CA, and parses the HTTP/1.1 requests inside (keep-alive) with a second,
// never-listening HTTP server. Each request then runs the phases (runner.ts).
//
// A CONNECT with no credential the proxy can read is answered `407` (a Basic challenge) and
// closed, not tunnelled: clients like git only send the token once challenged. A plain-HTTP
// request without one gets its `407` from the request-headers phase.
//
// Fail closed: the token is verified once per tunnel at CONNECT and attached to that TLS socket;
// a request on the inner server without that context did not come through the front and is
// denied (`no_scheme`), never evaluated loosely (smokescreen's CONNECT-MITM rule).
//
// Nothing a socket sends can take the process down: every handler runs behind #guard, which
// closes that one connection on a fault (docs/reliability.md). Limits and timeouts: limits.ts.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { isIP, type AddressInfo, type Socket } from 'node:net'
import { TLSSocket } from 'node:tls'
import { targetPath } from '../policy/index.js'
import { canonicalHost } from '../net/index.js'
import { LeafMinter, normalizeHost } from './ca.js'
import { DecisionContext, attributeToken, deny, type PolicyDenial } from './decision.js'
import { H2Front } from './h2/front.js'
import { handOver } from './handover.js'
import { passthroughTunnel } from './passthrough.js'
import type { Entry, ProxyCore, ProxyCounters, TunnelContext } from './request-state.js'
import { runRequest } from './runner.js'
import { requestToken, wantsProxyChallenge } from './token.js'
import { TransportRows, challenge, classifyClientError, endRaw, recordThenRefuse } from './transport.js'
import { WebSockets, isWebSocketUpgrade } from './transports/websocket/upgrade.js'
import { TransparentEgress, plainHostDisagrees } from './transparent.js'

const HOSTNAME = /^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*$/
/** Methods the proxy never forwards: TRACE/TRACK echo the request (injected credentials included). */
const REFUSED_METHODS = new Set(['TRACE', 'TRACK'])

export class ProxyFront {
  readonly #core: ProxyCore
  readonly #minter: LeafMinter
  readonly #outer: Server
  readonly #inner: Server
  readonly #tunnels = new WeakMap<Socket, TunnelContext>()
  /** Raw client sockets (plain connections and the sockets under tunnels). */
  readonly #sockets = new Set<Socket>()
  /** TLS sockets of open tunnels. */
  readonly #tunnelSockets = new Set<TLSSocket>()
  /** Requests being handled per socket (plain or TLS), for the shutdown drain. */
  readonly #busy = new Map<Socket, number>()
  readonly #tunnelsByWorkspace = new Map<string, number>()
  /** Handler promises still running (their rows not yet handed to the sink). */
  readonly #pending = new Set<Promise<unknown>>()
  readonly #transport: TransportRows
  /** Rows of CONNECTs answered 407: the core's challenge allowance (shared with plain requests' 407s), apart from transport violations so a burst of git clones cannot hide one. */
  readonly #challenges: TransportRows
  /** Open WebSocket relays (transports/websocket/upgrade.ts). */
  readonly #websockets: WebSockets
  /** Tunnels that negotiated `h2` (h2/front.ts): each stream is a request there. */
  readonly #h2: H2Front
  #closing = false
  /** Connections the sandbox intercepted, and its DNS queries (transparent.ts). */
  readonly egress: TransparentEgress

  constructor(core: ProxyCore, minter: LeafMinter) {
    this.#core = core
    this.egress = new TransparentEgress(core)
    this.#minter = minter
    this.#transport = new TransportRows(core)
    this.#challenges = new TransportRows(core, core.challengeRows)
    this.#websockets = new WebSockets(core)
    this.#h2 = new H2Front(core, this.#transport, (p, socket) => this.#guard(p, socket))
    const L = core.limits
    const headersTimeout = Math.min(L.headersTimeoutMs, L.requestTimeoutMs)
    const checkEvery = Math.min(1_000, Math.max(50, Math.floor(headersTimeout / 4)))
    const serverOpts = {
      keepAlive: true, requestTimeout: L.requestTimeoutMs, headersTimeout, keepAliveTimeout: L.keepAliveTimeoutMs,
      maxHeaderSize: L.maxHeaderBytes, connectionsCheckingInterval: checkEvery,
    }
    // A connection that never sends a byte is invisible to Node's header check: this timer bounds
    // it. It is a little longer than that check, so a request that did start gets its 408 first.
    const silentMs = headersTimeout + 2 * checkEvery + 100
    this.#outer = createServer(serverOpts, (req, res) => this.#guard(this.#request(req, res, false), req.socket))
    this.#inner = createServer(serverOpts, (req, res) => this.#guard(this.#request(req, res, true), req.socket))
    // The inner server never listens, and Node starts its header/request timeout checks on
    // 'listening': without this, a slowloris inside a tunnel would never time out.
    this.#inner.emit('listening')
    this.#outer.maxConnections = L.maxConnections
    this.#outer.on('drop', () => core.counters.connectionsRefused++)
    this.#outer.on('connect', (req: IncomingMessage, socket: Socket, head: Buffer) => this.#guard(this.#connect(req, socket, head), socket))
    // A CONNECT inside an intercepted tunnel would be a tunnel the phases cannot see: refused, with its row.
    this.#inner.on('connect', (req: IncomingMessage, socket: Socket) => this.#guard(this.#refuse(req, socket, this.#tunnels.get(socket), 'CONNECT inside an intercepted tunnel is not supported'), socket))
    // WebSocket upgrades are requests under policy (transports/websocket/upgrade.ts); other upgrades (h2c) are refused, with their row.
    this.#outer.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => this.#guard(this.#upgrade(req, socket, head, undefined), socket))
    this.#inner.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => this.#guard(this.#upgrade(req, socket, head, this.#tunnels.get(socket)), socket))
    this.#outer.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => this.#guard(this.#clientError(err, socket, undefined), socket))
    this.#inner.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => this.#guard(this.#clientError(err, socket, this.#tunnels.get(socket)), socket))
    this.#outer.on('connection', (s: Socket) => {
      this.#sockets.add(s)
      s.once('close', () => this.#sockets.delete(s))
      s.setTimeout(silentMs)
    })
  }

  get stats(): ProxyCounters {
    return this.#core.counters
  }

  listen(port: number, host = '127.0.0.1'): Promise<number> {
    return new Promise((resolve, reject) => {
      this.#outer.once('error', reject)
      this.#outer.listen(port, host, () => {
        this.#outer.off('error', reject)
        // Accept errors (EMFILE under a connection flood) must not become an uncaught 'error'.
        this.#outer.on('error', (err) => this.#core.log.error({ err: { message: err.message, code: (err as NodeJS.ErrnoException).code } }, 'proxy: listener error'))
        resolve((this.#outer.address() as AddressInfo).port)
      })
    })
  }

  /**
   * Stops accepting and closes idle connections at once; requests in flight may finish within
   * `drainMs` (their connections close as they finish), then every connection is cut. Resolves
   * once every handler has handed its row to the sink (bounded by the same deadline).
   */
  async close(drainMs = this.#core.limits.drainMs): Promise<void> {
    this.#closing = true
    this.#websockets.closeAll()
    const closed = new Promise<void>((r) => this.#outer.close(() => r()))
    this.#outer.closeIdleConnections()
    this.#h2.drain() // GOAWAY: h2 streams in flight may finish, then each session closes
    for (const t of this.#tunnelSockets) if (!this.#busy.get(t) && !this.#h2.owns(t)) t.destroy()
    let timer: NodeJS.Timeout | undefined
    const deadline = new Promise<void>((r) => {
      timer = setTimeout(() => {
        for (const s of this.#sockets) s.destroy()
        for (const t of this.#tunnelSockets) t.destroy()
        r()
      }, drainMs)
    })
    await Promise.race([closed, deadline])
    await closed
    // Handlers of cut connections finish quickly (their streams error); bounded all the same. The
    // bound's timer keeps the process alive: unreferenced, a handler waiting on nothing would let
    // serve's event loop end mid-shutdown (Node's exit 13, unsettled top-level await).
    let bound: NodeJS.Timeout | undefined
    const rows = new Promise<'expired'>((r) => (bound = setTimeout(() => r('expired'), drainMs)))
    const out = await Promise.race([Promise.allSettled([...this.#pending]).then(() => 'settled' as const), rows])
    clearTimeout(bound)
    clearTimeout(timer)
    if (out === 'expired' && this.#pending.size > 0) {
      this.#core.log.error({ handlers: this.#pending.size, drainMs }, 'proxy: request handlers still pending after the shutdown drain; their rows may be missing')
    }
    this.#inner.close(() => {})
  }

  /** The error boundary of every socket handler: a fault closes that connection, never the process. */
  #guard(p: Promise<unknown>, socket: Socket): void {
    this.#pending.add(p)
    p.then(
      () => this.#pending.delete(p),
      (err: unknown) => {
        this.#pending.delete(p)
        this.#core.counters.handlerFaults++
        socket.destroy()
        try {
          const e = err as { message?: string; code?: string; stack?: string }
          this.#core.log.error({ err: { message: e?.message ?? String(err), code: e?.code, stack: e?.stack } }, 'proxy: a connection handler failed; that connection was closed')
        } catch {
          // A logger that throws must not turn a closed connection into a crash.
        }
      },
    )
  }

  /** One HTTP request: plain (absolute URI) or inside a tunnel. Tracked for the shutdown drain. */
  async #request(req: IncomingMessage, res: ServerResponse, tunnelled: boolean): Promise<void> {
    this.#core.counters.requests++
    const socket = req.socket
    // Node has just reset the socket's timer for this request; while it is open, idle means no byte either way.
    socket.setTimeout(this.#core.limits.idleTimeoutMs)
    this.#busy.set(socket, (this.#busy.get(socket) ?? 0) + 1)
    try {
      await (tunnelled ? this.#tunneled(req, res) : this.#plain(req, res))
    } finally {
      const left = (this.#busy.get(socket) ?? 1) - 1
      if (left > 0) this.#busy.set(socket, left)
      else {
        this.#busy.delete(socket)
        // Draining: a connection whose last request finished is closed after its answer is flushed.
        if (this.#closing) socket.end()
      }
    }
  }

  /** Plain HTTP: an absolute-URI request (`GET http://host/path`). Not async: it hands on runRequest's promise as is. */
  #plain(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/'
    let parsed: URL | undefined
    try {
      parsed = /^[a-z][a-z0-9+.-]*:\/\//i.test(url) ? new URL(url) : undefined
    } catch {
      parsed = undefined
    }
    if (parsed && parsed.protocol === 'http:') {
      const host = normalizeHost(parsed.hostname)
      const entry: Entry = { scheme: 'http', host, port: parsed.port ? Number(parsed.port) : 80 }
      return runRequest(this.#core, req, res, entry, targetPath(url) || '/', refusedMethod(req))
    }
    // `GET https://…` over the plaintext leg, or an origin-form request sent to the proxy itself:
    // neither passed the TLS front, so neither may reach an upstream.
    const host = normalizeHost(parsed ? parsed.hostname : String(req.headers.host ?? '').replace(/:\d+$/, ''))
    const path = parsed ? parsed.pathname || '/' : url.split('?')[0] || '/'
    return runRequest(this.#core, req, res, { scheme: 'http', host, port: 0 }, path, deny('no_scheme'))
  }

  async #connect(req: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
    socket.on('error', () => socket.destroy())
    // Node has detached the socket from the HTTP server (and its timeout handling): ours now.
    socket.setTimeout(this.#core.limits.connectTimeoutMs, () => socket.destroy())
    const token = requestToken(this.#core.tokens, req)
    const target = parseAuthority(req.url ?? '')
    if (!target) {
      this.#core.counters.transportErrors++
      await this.#transport.record(deny('no_scheme', { transport: 'connect_target_malformed' }, 400), await token, { method: 'CONNECT' })
      endRaw(socket, 400, 'CONNECT needs host:port\n')
      return
    }
    const check = await token
    if (wantsProxyChallenge(req, check)) {
      await challenge(this.#challenges, check, target.host, socket)
      return
    }
    const egress = await this.egress.connect(req, target, check, socket, head)
    if (egress === 'handled') return
    this.#core.counters.tunnels++
    const tunnel: TunnelContext = { host: egress?.host ?? target.host, port: target.port, token }
    tunnel.checked = check
    if (check.ok && !this.#admitTunnel(check.claims.workspace_id, socket)) {
      const ctx = new DecisionContext({ destination: target.host, method: 'CONNECT', path: '' })
      attributeToken(ctx, check)
      const denial = deny('limit_exceeded', { limit: 'connections_per_workspace', max: this.#core.limits.maxConnectionsPerWorkspace }, 429)
      ctx.denial = denial
      await recordThenRefuse(this.#core, ctx, socket, 429)
      return
    }
    if (egress?.plain) {
      // Plain HTTP the sandbox intercepted: its requests are parsed as they come (front-door style).
      tunnel.plain = true
      socket.setTimeout(this.#core.limits.connectTimeoutMs, () => socket.destroy())
      this.#tunnels.set(socket, tunnel)
      this.#inner.emit('connection', socket)
      return
    }
    if (!egress && (await passthroughTunnel(this.#core, socket, head, target, check))) return
    let defaultContext
    try {
      defaultContext = await this.#minter.contextFor(tunnel.host)
    } catch {
      socket.end('HTTP/1.1 502 Bad Gateway\r\nconnection: close\r\n\r\n')
      return
    }
    if (socket.destroyed || this.#closing) {
      socket.destroy()
      return
    }
    // Transparent egress has answered the CONNECT already and put the bytes it read back.
    if (!egress) {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n')
      if (head.length) socket.unshift(head)
    }
    const tls = new TLSSocket(socket, {
      isServer: true,
      secureContext: defaultContext,
      // h2 first: a client that offers both gets HTTP/2 (h2/front.ts); one that offers neither, HTTP/1.1.
      ALPNProtocols: ['h2', 'http/1.1'],
      SNICallback: (servername, cb) => {
        tunnel.sni = normalizeHost(servername)
        this.#minter.contextFor(servername).then((ctx) => cb(null, ctx), (err: Error) => cb(err))
      },
    })
    // The TLS socket sees the traffic; its timer bounds the handshake and the wait for the first
    // request (connectTimeoutMs), then each request sets the idle timeout (#request).
    socket.setTimeout(0)
    tls.setTimeout(this.#core.limits.connectTimeoutMs, () => tls.destroy())
    tls.on('error', () => tls.destroy())
    this.#tunnelSockets.add(tls)
    tls.once('close', () => {
      this.#tunnelSockets.delete(tls)
      socket.destroy()
    })
    this.#tunnels.set(tls, tunnel)
    handOver(tls, (err) => this.#guard(this.#clientError(err, tls, tunnel), tls), (h2) => (h2 ? this.#h2.accept(tls, tunnel) : this.#inner.emit('connection', tls)))
  }

  /** Counts an open tunnel against its workspace; false when the workspace is at its limit. */
  #admitTunnel(workspaceId: string, socket: Socket): boolean {
    const open = this.#tunnelsByWorkspace.get(workspaceId) ?? 0
    if (open >= this.#core.limits.maxConnectionsPerWorkspace) return false
    this.#tunnelsByWorkspace.set(workspaceId, open + 1)
    socket.once('close', () => {
      const n = (this.#tunnelsByWorkspace.get(workspaceId) ?? 1) - 1
      if (n > 0) this.#tunnelsByWorkspace.set(workspaceId, n)
      else this.#tunnelsByWorkspace.delete(workspaceId)
    })
    return true
  }

  /** A parser or socket error: answered with a bare status (or closed) and recorded once per connection. */
  async #clientError(err: NodeJS.ErrnoException, socket: Socket, tunnel: TunnelContext | undefined): Promise<void> {
    if (reported.has(socket)) {
      socket.destroy()
      return
    }
    reported.add(socket)
    const verdict = classifyClientError(err, this.#core)
    // A connection that timed out without sending a byte made no attempt: closed, not recorded.
    if (err?.code === 'ERR_HTTP_REQUEST_TIMEOUT' && socket.bytesRead === 0) delete verdict.denial
    // A response is under way on this connection (pipelined garbage): a 400 written now would land
    // inside that response's bytes. The connection is only closed.
    if (this.#busy.get(socket)) delete verdict.status
    if (verdict.denial) {
      this.#core.counters.transportErrors++
      await this.#transport.record(verdict.denial, tunnel ? await tunnel.token : undefined, tunnel ? { destination: tunnel.host } : {})
    }
    if (verdict.status) endRaw(socket, verdict.status)
    else socket.destroy()
  }

  #upgrade(req: IncomingMessage, socket: Socket, head: Buffer, tunnel: TunnelContext | undefined): Promise<void> {
    // A transparent plain-HTTP tunnel's Host must name what its address was resolved for, upgrade or not.
    const disagrees = tunnel?.plain ? plainHostDisagrees(tunnel, req) : undefined
    if (disagrees) {
      this.#core.counters.requests++
      socket.on('error', () => socket.destroy())
      return refuseRaw(this.#core, req, socket, tunnel, disagrees)
    }
    // A TLS socket without its tunnel's context did not come through the front: refused, like #tunneled's no_scheme.
    if (isWebSocketUpgrade(req) && (tunnel || !(socket instanceof TLSSocket))) return this.#websockets.handle(req, socket, head, tunnel)
    return this.#refuse(req, socket, tunnel, tunnel || !isWebSocketUpgrade(req) ? 'protocol upgrades other than WebSocket are not supported through the proxy' : 'no tunnel context')
  }

  /** Refuses a request the phases cannot handle (upgrade, CONNECT in a tunnel) with a 403 and its row. */
  async #refuse(req: IncomingMessage, socket: Socket, tunnel: TunnelContext | undefined, message: string): Promise<void> {
    this.#core.counters.requests++
    socket.on('error', () => socket.destroy())
    await refuseRaw(this.#core, req, socket, tunnel, deny('no_match', { message }))
  }

  /** A request inside an intercepted tunnel. Not async: it hands on runRequest's promise as is. */
  #tunneled(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const tunnel = this.#tunnels.get(req.socket)
    // The path as written: the request-headers phase makes it canonical (or refuses it) once.
    const path = targetPath(req.url ?? '/') || '/'
    if (!tunnel) {
      return runRequest(this.#core, req, res, { scheme: 'http', host: normalizeHost(String(req.headers.host ?? '')), port: 0 }, path, deny('no_scheme'))
    }
    const entry: Entry = (tunnel.entry ??= { scheme: tunnel.plain ? 'http' : 'https', host: tunnel.host, port: tunnel.port, tunnel })
    return runRequest(this.#core, req, res, entry, path, (tunnel.plain && plainHostDisagrees(tunnel, req)) || refusedMethod(req))
  }
}

/** Sockets whose transport error was already answered (Node may report several for one socket). */
const reported = new WeakSet<Socket>()

function refusedMethod(req: IncomingMessage): PolicyDenial | undefined {
  const method = (req.method ?? '').toUpperCase()
  return REFUSED_METHODS.has(method) ? deny('no_match', { message: `${method} is refused by the proxy: it would echo the request, injected credentials included` }) : undefined
}

/** Records, then answers, a request taken off the HTTP server (upgrade, CONNECT in a tunnel): 403 and one row. */
async function refuseRaw(core: ProxyCore, req: IncomingMessage, socket: Socket, tunnel: TunnelContext | undefined, denial: PolicyDenial): Promise<void> {
  const url = req.url ?? '/'
  let path = req.method === 'CONNECT' ? '' : url.split('?')[0] || '/'
  let host = tunnel?.host ?? ''
  if (/^https?:\/\//i.test(url)) {
    try {
      const u = new URL(url)
      path = u.pathname
      host ||= normalizeHost(u.hostname)
    } catch {
      path = '/'
    }
  }
  const ctx = new DecisionContext({ destination: host || normalizeHost(String(req.headers.host ?? '').replace(/:\d+$/, '')), method: (req.method ?? 'GET').toUpperCase(), path })
  const check = await requestToken(core.tokens, req, tunnel)
  if (check.ok) attributeToken(ctx, check)
  ctx.denial = denial
  await recordThenRefuse(core, ctx, socket, 403)
}

/** `host:port` of a CONNECT line; IPv6 in brackets. Undefined when malformed. */
export function parseAuthority(authority: string): { host: string; port: number } | undefined {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:\s/]+):(\d{1,5})$/.exec(authority.trim())
  if (!m) return undefined
  const port = Number(m[2])
  if (port < 1 || port > 65535) return undefined
  // Literal addresses in any spelling (2130706433, 0x7f.1, [::ffff:127.0.0.1]) get one form.
  const host = canonicalHost(m[1]!)
  if (host === undefined || (!isIP(host) && !HOSTNAME.test(host))) return undefined
  return { host, port }
}
