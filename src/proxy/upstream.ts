// The upstream client: one pooled undici Agent for every upstream, built at start, keep-alive on,
// normal certificate verification against the system roots plus `--upstream-ca` extras. Request
// bodies stream through unless a phase buffered them; a response body is read by the relay
// without a stream in between when it can be (pooled-response.ts), else as a stream.
// Every connection is made through the AddressGuard (src/net/). A pooled connection was
// checked against the allowance of the agent that made it, so requests whose rule names private
// ranges (`allow_private`) get an agent of their own per distinct list: a connection opened for
// one allowance is never reused under a narrower one.
import { connect as netConnect, type Socket } from 'node:net'
import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls'
import type { Readable } from 'node:stream'
import { Agent, type buildConnector, type Dispatcher } from 'undici'
import { AddressGuard, allowList, guardedConnector } from '../net/index.js'
import { H2Upstream, type H2Request } from './h2/upstream.js'
import { dispatchPooled, type DirectBody } from './pooled-response.js'

/** Connection-level headers that never cross a proxy (RFC 9110 §7.6.1), plus the proxy's own. */
export const HOP_BY_HOP = new Set([
  'connection', 'proxy-connection', 'keep-alive', 'proxy-authorization', 'proxy-authenticate', 'te', 'trailer',
  'transfer-encoding', 'upgrade', 'host', 'content-length', 'expect', 'http2-settings',
])

export interface UpstreamOptions {
  /** Extra PEM roots trusted for upstream TLS (tests, private CAs). */
  extraCaPem?: string[]
  /** Max connections per origin; default unlimited (every in-flight stream needs its own; idle ones are reused). */
  connections?: number
  headersTimeoutMs?: number
  bodyTimeoutMs?: number
  /** Checks every address connected to; default: refuses special-purpose ranges, no own listeners. */
  guard?: AddressGuard
}

/** Distinct `allow_private` lists kept with their own pool; beyond this the oldest pool is closed. */
const ALLOWANCE_AGENTS_MAX = 64

export interface UpstreamRequest extends H2Request {
  /** CIDRs the matched rule names in `allow_private` (empty or absent: none). */
  allowPrivate?: readonly string[]
  /** The client spoke HTTP/2: h2 upstream too when the origin offers it (gRPC needs it end to end). */
  h2?: boolean
}

export interface UpstreamResponse {
  status: number
  headers: Record<string, string | string[]>
  body: Readable
  /** The body without a stream (the pooled HTTP/1.1 client's), while nothing has read `body`. */
  readonly direct?: DirectBody
  /** The upstream's trailers, filled in by the end of its body (empty when it sent none, and over HTTP/1.1). */
  trailers: Record<string, string | string[]>
}

export class Upstream {
  readonly #opts: UpstreamOptions
  readonly #secureContext: SecureContext | undefined
  readonly #guard: AddressGuard
  readonly #agent: Agent
  /** HTTP/2 sessions for requests that arrived over HTTP/2 (h2/upstream.ts). */
  readonly #h2: H2Upstream
  /** The BlockList of each frozen `allow_private` list, for the h2 sessions. */
  readonly #allowLists = new WeakMap<readonly string[], ReturnType<typeof allowList>>()
  readonly #allowanceAgents = new Map<string, Agent>()
  /** The pool key of each frozen `allow_private` list seen (a compiled rule's list, one array for its life). */
  readonly #allowanceKeys = new WeakMap<readonly string[], string>()

  constructor(opts: UpstreamOptions = {}) {
    this.#opts = opts
    this.#guard = opts.guard ?? new AddressGuard()
    const ca = opts.extraCaPem?.length ? [...rootCertificates, ...opts.extraCaPem] : undefined
    // One SecureContext for every upstream connection: passing `ca` to each tls.connect would
    // re-parse every root certificate per connection (it dominated the first profile).
    this.#secureContext = ca ? createSecureContext({ ca }) : undefined
    this.#agent = this.#build(undefined)
    this.#h2 = new H2Upstream(this.#guard, this.#secureContext, opts.headersTimeoutMs ?? 300_000)
  }

  #build(allowPrivate: readonly string[] | undefined): Agent {
    const opts = this.#opts
    const allow = allowPrivate?.length ? allowList(allowPrivate) : undefined
    const guard = this.#guard
    const secureContext = this.#secureContext
    return new Agent({
      ...(opts.connections ? { connections: opts.connections } : {}),
      pipelining: 1,
      keepAliveTimeout: 30_000,
      headersTimeout: opts.headersTimeoutMs ?? 300_000,
      // LLM streams can pause for minutes between tokens on long thinking; the agent's own
      // client decides when to give up.
      bodyTimeout: opts.bodyTimeoutMs ?? 0,
      // undici derives SNI and the verified identity from the Host header; the agent controls
      // that header, so the identity is pinned to the origin (the CONNECT target) instead: the
      // guarded connector resolves the name, checks every address and dials the checked one.
      connect: guardedConnector(guard, allow, secureContext ? ({ secureContext } as buildConnector.BuildOptions) : {}),
    })
  }

  #agentFor(allowPrivate: readonly string[] | undefined): Agent {
    if (!allowPrivate?.length) return this.#agent
    // Only a frozen list is keyed by identity: one that can change must be joined every time.
    let key = this.#allowanceKeys.get(allowPrivate)
    if (key === undefined) {
      key = allowPrivate.join(',')
      if (Object.isFrozen(allowPrivate)) this.#allowanceKeys.set(allowPrivate, key)
    }
    let agent = this.#allowanceAgents.get(key)
    if (!agent) {
      if (this.#allowanceAgents.size >= ALLOWANCE_AGENTS_MAX) {
        const [oldKey, old] = this.#allowanceAgents.entries().next().value as [string, Agent]
        this.#allowanceAgents.delete(oldKey)
        void old.close().catch(() => {})
      }
      agent = this.#build(allowPrivate)
      this.#allowanceAgents.set(key, agent)
    }
    return agent
  }

  async send(req: UpstreamRequest): Promise<UpstreamResponse> {
    if (req.h2 && req.origin.startsWith('https:')) {
      const res = await this.#sendH2(req)
      if (res) return res
    }
    // The caller may have put the Host header in already (the upstream phase does): no copy then.
    const headers: Record<string, string | string[]> = req.headers.host === req.host ? req.headers : { ...req.headers, host: req.host }
    // A dispatch, never a redirect followed: each hop is the agent's and must pass the policy on its own.
    return dispatchPooled(this.#agentFor(req.allowPrivate), {
      origin: req.origin,
      method: req.method as Dispatcher.HttpMethod,
      path: req.path,
      headers,
      body: req.body as Dispatcher.DispatchOptions['body'],
    }, req.signal)
  }

  #sendH2(req: UpstreamRequest): Promise<UpstreamResponse | undefined> {
    const list = req.allowPrivate?.length ? req.allowPrivate : undefined
    let allow = list && this.#allowLists.get(list)
    if (list && !allow) {
      allow = allowList(list)
      if (Object.isFrozen(list)) this.#allowLists.set(list, allow)
    }
    return this.#h2.send(req, allow, list ? list.join(',') : '')
  }

  /**
   * A raw TCP connection to `host:port` through the address guard (a passthrough tunnel splices
   * its TLS unread): refused addresses reject with DestinationRefused, as for every upstream.
   */
  async dialRaw(host: string, port: number, allowPrivate?: readonly string[]): Promise<Socket> {
    const address = await this.#guard.resolve(host, port, allowPrivate?.length ? allowList(allowPrivate) : undefined)
    return new Promise<Socket>((resolve, reject) => {
      const s = netConnect({ host: address, port }, () => {
        s.off('error', reject)
        resolve(s)
      })
      s.once('error', reject)
    })
  }

  /**
   * One connection of its own (not pooled) to `host:port`, through the same address guard and TLS
   * verification as the pool: a WebSocket's upstream leg (transports/websocket/upgrade.ts), which outlives
   * any request and so cannot borrow a pooled connection.
   */
  connect(host: string, port: number, secure: boolean, allowPrivate?: readonly string[]): Promise<Socket> {
    const allow = allowPrivate?.length ? allowList(allowPrivate) : undefined
    const connector = guardedConnector(this.#guard, allow, this.#secureContext ? ({ secureContext: this.#secureContext } as buildConnector.BuildOptions) : {})
    const name = host.includes(':') ? `[${host}]` : host
    return new Promise((resolve, reject) => {
      connector({ hostname: name, host: `${name}:${port}`, protocol: secure ? 'https:' : 'http:', port: String(port), servername: undefined as unknown as string, localAddress: null, httpSocket: undefined } as buildConnector.Options, (err, socket) => {
        if (err || !socket) reject(err ?? new Error('no socket'))
        else resolve(socket as Socket)
      })
    })
  }

  async close(): Promise<void> {
    await this.#h2.close()
    await Promise.all([this.#agent, ...this.#allowanceAgents.values()].map((a) => a.close()))
  }

  async destroy(): Promise<void> {
    this.#h2.destroy()
    await Promise.all([this.#agent, ...this.#allowanceAgents.values()].map((a) => a.destroy()))
  }
}
