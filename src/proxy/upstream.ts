// The upstream client: one pooled undici Agent for every upstream, built at start, keep-alive on,
// normal certificate verification against the system roots plus `--upstream-ca` extras. Request
// bodies stream through unless a phase buffered them; response bodies come back as a stream.
import { createSecureContext, rootCertificates } from 'node:tls'
import type { Readable } from 'node:stream'
import { Agent, buildConnector, type Dispatcher } from 'undici'

/** Connection-level headers that never cross a proxy (RFC 9110 §7.6.1), plus the proxy's own. */
export const HOP_BY_HOP = new Set([
  'connection', 'proxy-connection', 'keep-alive', 'proxy-authorization', 'proxy-authenticate', 'te', 'trailer',
  'transfer-encoding', 'upgrade', 'host', 'content-length', 'expect',
])

export interface UpstreamOptions {
  /** Extra PEM roots trusted for upstream TLS (tests, private CAs). */
  extraCaPem?: string[]
  /** Max connections per origin; default unlimited (every in-flight stream needs its own; idle ones are reused). */
  connections?: number
  headersTimeoutMs?: number
  bodyTimeoutMs?: number
}

export interface UpstreamRequest {
  origin: string
  method: string
  /** Path with query. */
  path: string
  /** Host header to send. */
  host: string
  headers: Record<string, string | string[]>
  body: Readable | Buffer | AsyncIterable<Buffer> | undefined
  signal: AbortSignal | import('node:events').EventEmitter
}

export interface UpstreamResponse {
  status: number
  headers: Record<string, string | string[]>
  body: Readable
}

export class Upstream {
  readonly #agent: Agent

  constructor(opts: UpstreamOptions = {}) {
    const ca = opts.extraCaPem?.length ? [...rootCertificates, ...opts.extraCaPem] : undefined
    // One SecureContext for every upstream connection: passing `ca` to each tls.connect would
    // re-parse every root certificate per connection (it dominated the first profile).
    const secureContext = ca ? createSecureContext({ ca }) : undefined
    const base = buildConnector({ ...(secureContext ? { secureContext } : {}), rejectUnauthorized: true } as buildConnector.BuildOptions)
    this.#agent = new Agent({
      ...(opts.connections ? { connections: opts.connections } : {}),
      pipelining: 1,
      keepAliveTimeout: 30_000,
      headersTimeout: opts.headersTimeoutMs ?? 300_000,
      // LLM streams can pause for minutes between tokens on long thinking; the agent's own
      // client decides when to give up.
      bodyTimeout: opts.bodyTimeoutMs ?? 0,
      // undici derives SNI and the verified identity from the Host header; the agent controls
      // that header, so the identity is pinned to the origin (the CONNECT target) instead.
      connect: (options, callback) => base({ ...options, servername: undefined }, callback),
    })
  }

  async send(req: UpstreamRequest): Promise<UpstreamResponse> {
    const headers: Record<string, string | string[]> = { ...req.headers, host: req.host }
    const res = await this.#agent.request({
      origin: req.origin,
      method: req.method as Dispatcher.HttpMethod,
      path: req.path,
      headers,
      body: req.body,
      signal: req.signal,
      // Redirects are the agent's business: each hop must pass the policy on its own.
      maxRedirections: 0,
    } as Dispatcher.RequestOptions)
    return { status: res.statusCode, headers: res.headers as Record<string, string | string[]>, body: res.body as unknown as Readable }
  }

  close(): Promise<void> {
    return this.#agent.close()
  }

  destroy(): Promise<void> {
    return this.#agent.destroy()
  }
}
