// The front: an HTTP forward proxy. Absolute-URI requests are plain HTTP; `CONNECT host:port`
// tunnels are intercepted: the proxy answers 200, terminates TLS with a leaf minted for the SNI
// host from the corral CA, and parses the HTTP/1.1 requests inside (keep-alive) with a second,
// never-listening HTTP server. Each request then runs the phases (runner.ts).
//
// Fail closed: the token is verified once per tunnel at CONNECT and attached to that TLS socket;
// a request on the inner server without that context did not come through the front and is
// denied (`no_scheme`), never evaluated loosely (smokescreen's CONNECT-MITM rule).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { isIP, type AddressInfo, type Socket } from 'node:net'
import { TLSSocket } from 'node:tls'
import { LeafMinter, normalizeHost } from './ca.js'
import { DecisionContext, deny, denyBody } from './decision.js'
import { terminal } from './phases/terminal.js'
import type { Entry, ProxyCore, TunnelContext } from './request-state.js'
import { runRequest } from './runner.js'

const HOSTNAME = /^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*$/

export class ProxyFront {
  readonly #core: ProxyCore
  readonly #minter: LeafMinter
  readonly #outer: Server
  readonly #inner: Server
  readonly #tunnels = new WeakMap<Socket, TunnelContext>()
  readonly #sockets = new Set<Socket>()
  /** Cheap counters for benchmarks and operators (no per-request logging). */
  readonly stats = { tunnels: 0, requests: 0 }

  constructor(core: ProxyCore, minter: LeafMinter) {
    this.#core = core
    this.#minter = minter
    const serverOpts = { keepAlive: true, requestTimeout: 0, headersTimeout: 60_000, keepAliveTimeout: 65_000 }
    this.#outer = createServer(serverOpts, (req, res) => void this.#plain(req, res))
    this.#inner = createServer(serverOpts, (req, res) => void this.#tunneled(req, res))
    this.#outer.on('connect', (req: IncomingMessage, socket: Socket, head: Buffer) => void this.#connect(req, socket, head))
    // Protocol upgrades (WebSocket) cannot be inspected by the phases: refused, with their row.
    this.#outer.on('upgrade', (req: IncomingMessage, socket: Socket) => void this.#upgrade(req, socket, undefined))
    this.#inner.on('upgrade', (req: IncomingMessage, socket: Socket) => void this.#upgrade(req, socket, this.#tunnels.get(socket)))
    for (const s of [this.#outer, this.#inner]) {
      s.on('clientError', (_err, socket: Socket) => {
        if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n')
        else socket.destroy()
      })
    }
    this.#outer.on('connection', (s: Socket) => {
      this.#sockets.add(s)
      s.once('close', () => this.#sockets.delete(s))
    })
  }

  listen(port: number, host = '127.0.0.1'): Promise<number> {
    return new Promise((resolve, reject) => {
      this.#outer.once('error', reject)
      this.#outer.listen(port, host, () => {
        this.#outer.off('error', reject)
        resolve((this.#outer.address() as AddressInfo).port)
      })
    })
  }

  /** Stops accepting, then closes idle keep-alive connections; open streams are cut after `graceMs`. */
  async close(graceMs = 5_000): Promise<void> {
    const closed = new Promise<void>((r) => this.#outer.close(() => r()))
    this.#outer.closeIdleConnections()
    this.#inner.closeIdleConnections()
    const timer = setTimeout(() => {
      for (const s of this.#sockets) s.destroy()
    }, graceMs)
    timer.unref()
    await closed
    clearTimeout(timer)
  }

  /** Plain HTTP: an absolute-URI request (`GET http://host/path`). */
  async #plain(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.stats.requests++
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
      return runRequest(this.#core, req, res, entry, parsed.pathname || '/')
    }
    // `GET https://…` over the plaintext leg, or an origin-form request sent to the proxy itself:
    // neither passed the TLS front, so neither may reach an upstream.
    const host = normalizeHost(parsed ? parsed.hostname : String(req.headers.host ?? '').replace(/:\d+$/, ''))
    const path = parsed ? parsed.pathname || '/' : url.split('?')[0] || '/'
    return runRequest(this.#core, req, res, { scheme: 'http', host, port: 0 }, path, deny('no_scheme'))
  }

  async #connect(req: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
    socket.on('error', () => socket.destroy())
    const target = parseAuthority(req.url ?? '')
    if (!target) {
      socket.end('HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\nCONNECT needs host:port\n')
      return
    }
    this.stats.tunnels++
    const auth = req.headers['proxy-authorization']
    const tunnel: TunnelContext = { host: target.host, port: target.port, token: this.#core.tokens.check(Array.isArray(auth) ? auth[0] : auth) }
    let defaultContext
    try {
      defaultContext = await this.#minter.contextFor(target.host)
    } catch {
      socket.end('HTTP/1.1 502 Bad Gateway\r\nconnection: close\r\n\r\n')
      return
    }
    if (socket.destroyed) return
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n')
    if (head.length) socket.unshift(head)
    const tls = new TLSSocket(socket, {
      isServer: true,
      secureContext: defaultContext,
      ALPNProtocols: ['http/1.1'],
      SNICallback: (servername, cb) => {
        tunnel.sni = normalizeHost(servername)
        this.#minter.contextFor(servername).then((ctx) => cb(null, ctx), (err: Error) => cb(err))
      },
    })
    tls.on('error', () => tls.destroy())
    this.#tunnels.set(tls, tunnel)
    this.#inner.emit('connection', tls)
  }

  #upgrade(req: IncomingMessage, socket: Socket, tunnel: TunnelContext | undefined): Promise<void> {
    this.stats.requests++
    socket.on('error', () => socket.destroy())
    return refuseUpgrade(this.#core, req, socket, tunnel)
  }

  /** A request inside an intercepted tunnel. */
  async #tunneled(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.stats.requests++
    const tunnel = this.#tunnels.get(req.socket)
    let path = req.url ?? '/'
    if (/^https?:\/\//i.test(path)) {
      try {
        path = new URL(path).pathname
      } catch {
        path = '/'
      }
    }
    path = path.split('?')[0] || '/'
    if (!tunnel) {
      return runRequest(this.#core, req, res, { scheme: 'http', host: normalizeHost(String(req.headers.host ?? '')), port: 0 }, path, deny('no_scheme'))
    }
    const entry: Entry = { scheme: 'https', host: tunnel.host, port: tunnel.port, tunnel }
    return runRequest(this.#core, req, res, entry, path)
  }
}

/** Refuses an Upgrade request with a 403 and writes its one decision row (reason no_match). */
async function refuseUpgrade(core: ProxyCore, req: IncomingMessage, socket: Socket, tunnel: TunnelContext | undefined): Promise<void> {
  const url = req.url ?? '/'
  let path = url.split('?')[0] || '/'
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
  const auth = req.headers['proxy-authorization']
  const check = tunnel ? await tunnel.token : await core.tokens.check(Array.isArray(auth) ? auth[0] : auth)
  if (check.ok) ctx.attribution = { ...ctx.attribution, org_id: check.claims.org_id, workspace_id: check.claims.workspace_id }
  const denial = deny('no_match', { message: 'protocol upgrades (WebSocket) are not supported through the proxy' })
  ctx.denial = denial
  const body = denyBody(ctx, denial)
  if (socket.writable) socket.end(`HTTP/1.1 403 Forbidden\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nx-corral-deny-reason: no_match\r\nconnection: close\r\n\r\n${body}`)
  await terminal(core, ctx)
}

/** `host:port` of a CONNECT line; IPv6 in brackets. Undefined when malformed. */
export function parseAuthority(authority: string): { host: string; port: number } | undefined {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:\s/]+):(\d{1,5})$/.exec(authority.trim())
  if (!m) return undefined
  const port = Number(m[2])
  if (port < 1 || port > 65535) return undefined
  const host = normalizeHost(m[1]!)
  if (!isIP(host) && !HOSTNAME.test(host)) return undefined
  return { host, port }
}
