// HTTP/2 to the upstream, for requests that arrived over HTTP/2: node:http2 sessions, one per
// origin and `allow_private` list, each dialed through the address guard like every upstream
// connection (src/net/) and verified against the origin's name. ALPN decides: an origin that does
// not pick `h2` is remembered for a while as HTTP/1.1-only, and the request goes through the
// pooled undici agent instead (upstream.ts). undici's own h2 client was measured to drop the
// response trailers, which gRPC cannot do without (docs/proxy.md "HTTP/2").
import { once } from 'node:events'
import type { ClientSignal } from '../pooled-response.js'
import { connect as h2connect, constants, type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http2'
import { isIP, type BlockList } from 'node:net'
import { Readable, pipeline } from 'node:stream'
import { checkServerIdentity, connect as tlsConnect, type SecureContext } from 'node:tls'
import type { AddressGuard } from '../../net/index.js'

/**
 * A request to an upstream, as upstream.ts takes it (its UpstreamRequest adds what it decides on
 * before calling here); defined here because upstream.ts imports this file, not the other way.
 */
export interface H2Request {
  origin: string
  method: string
  /** Path with query. */
  path: string
  /** Host header to send. */
  host: string
  headers: Record<string, string | string[]>
  body: Readable | Buffer | AsyncIterable<Buffer> | undefined
  signal: ClientSignal
}

export interface H2Response {
  status: number
  headers: Record<string, string | string[]>
  body: Readable
  trailers: Record<string, string | string[]>
}

/** How long an origin that answered ALPN with HTTP/1.1 is not asked for h2 again. */
const H1_ONLY_MS = 5 * 60_000
/** An upstream session with no stream for this long is closed. */
const SESSION_IDLE_MS = 30_000

interface Origin {
  session?: ClientHttp2Session
  pending?: Promise<ClientHttp2Session | undefined>
  h1Until?: number
}

export class H2Upstream {
  readonly #guard: AddressGuard
  readonly #secureContext: SecureContext | undefined
  readonly #headersTimeoutMs: number
  readonly #origins = new Map<string, Origin>()

  constructor(guard: AddressGuard, secureContext: SecureContext | undefined, headersTimeoutMs: number) {
    this.#guard = guard
    this.#secureContext = secureContext
    this.#headersTimeoutMs = headersTimeoutMs
  }

  /** The upstream's answer over h2, or undefined when the origin does not speak h2 (send it over HTTP/1.1). */
  async send(req: H2Request, allow: BlockList | undefined, allowKey: string): Promise<H2Response | undefined> {
    const session = await this.#session(req.origin, allow, allowKey)
    if (!session) return undefined
    const headers: OutgoingHttpHeaders = { ':method': req.method, ':path': req.path, ':authority': req.host, ':scheme': 'https' }
    for (const k in req.headers) if (k !== 'host') headers[k] = req.headers[k]
    const body = req.body
    const stream = session.request(headers, { endStream: body === undefined || (Buffer.isBuffer(body) && body.length === 0) })
    const cancel = (): void => void stream.close(constants.NGHTTP2_CANCEL)
    onAbort(req.signal, cancel)
    if (Buffer.isBuffer(body)) {
      if (body.length) stream.end(body)
    } else if (body) {
      // A body that fails (the client left, past the size limit) cancels the upstream stream.
      pipeline(body instanceof Readable ? body : Readable.from(body), stream, (err) => err && stream.destroy(err))
    }
    const trailers: Record<string, string | string[]> = {}
    stream.on('trailers', (t: IncomingHttpHeaders) => copyFields(t, trailers))
    stream.setTimeout(this.#headersTimeoutMs, () => stream.destroy(Object.assign(new Error('upstream headers timeout'), { code: 'UND_ERR_HEADERS_TIMEOUT' })))
    const head = await response(stream)
    // The agent's own client decides how long a body may pause (LLM streams think for minutes).
    stream.setTimeout(0)
    const out: Record<string, string | string[]> = {}
    copyFields(head, out)
    return { status: Number(head[':status']), headers: out, body: stream, trailers }
  }

  async close(): Promise<void> {
    const all = [...this.#origins.values()].map((o) => o.session).filter((s): s is ClientHttp2Session => !!s && !s.closed)
    this.#origins.clear()
    await Promise.all(all.map((s) => new Promise<void>((r) => s.close(() => r()))))
  }

  destroy(): void {
    for (const o of this.#origins.values()) o.session?.destroy()
    this.#origins.clear()
  }

  #session(origin: string, allow: BlockList | undefined, allowKey: string): Promise<ClientHttp2Session | undefined> | ClientHttp2Session | undefined {
    const key = `${origin} ${allowKey}`
    const o = this.#origins.get(key) ?? {}
    if (o.h1Until !== undefined && o.h1Until > Date.now()) return undefined
    if (o.session && !o.session.closed && !o.session.destroyed) return o.session
    if (o.pending) return o.pending
    this.#origins.set(key, o)
    o.pending = this.#open(origin, allow).then(
      (session) => {
        delete o.pending
        if (!session) o.h1Until = Date.now() + H1_ONLY_MS
        else {
          o.session = session
          const forget = (): void => {
            if (o.session === session) delete o.session
          }
          session.once('close', forget)
          session.once('goaway', forget)
        }
        return session
      },
      (err: unknown) => {
        delete o.pending
        throw err
      },
    )
    return o.pending
  }

  async #open(origin: string, allow: BlockList | undefined): Promise<ClientHttp2Session | undefined> {
    const url = new URL(origin)
    const hostname = url.hostname.replace(/^\[|\]$/g, '')
    const port = Number(url.port) || 443
    const address = await this.#guard.resolve(hostname, port, allow)
    const socket = tlsConnect({
      host: address, port,
      ...(isIP(hostname) ? {} : { servername: hostname }),
      ...(this.#secureContext ? { secureContext: this.#secureContext } : {}),
      ALPNProtocols: ['h2', 'http/1.1'],
      rejectUnauthorized: true,
      // The socket dials the checked address; the certificate must name the origin.
      checkServerIdentity: (_host, cert) => checkServerIdentity(hostname, cert),
    })
    try {
      await once(socket, 'secureConnect')
    } catch (err) {
      socket.destroy()
      throw err
    }
    if (socket.alpnProtocol !== 'h2') {
      socket.destroy()
      return undefined
    }
    const session = h2connect(origin, { createConnection: () => socket })
    session.on('error', () => session.destroy())
    session.setTimeout(SESSION_IDLE_MS, () => session.close())
    // An idle pooled session must not keep serve's event loop alive.
    session.unref()
    return session
  }
}

function response(stream: ClientHttp2Stream): Promise<IncomingHttpHeaders> {
  return new Promise((resolve, reject) => {
    const done = (): void => void stream.off('response', onResponse).off('error', onError).off('close', onClose)
    const onResponse = (h: IncomingHttpHeaders): void => {
      done()
      resolve(h)
    }
    const onError = (err: Error): void => {
      done()
      reject(err)
    }
    const onClose = (): void => {
      done()
      reject(Object.assign(new Error('upstream stream closed before its response'), { code: 'ECONNRESET' }))
    }
    stream.once('response', onResponse).once('error', onError).once('close', onClose)
  })
}

/** Header fields without the pseudo-headers (`:status`). */
function copyFields(from: IncomingHttpHeaders, to: Record<string, string | string[]>): void {
  for (const k in from) {
    if (k.charCodeAt(0) === 58) continue
    const v = from[k]
    if (v !== undefined) to[k] = Array.isArray(v) ? v : String(v)
  }
}

function onAbort(signal: ClientSignal, fn: () => void): void {
  if ('aborted' in signal && signal.aborted) return fn()
  if (typeof (signal as AbortSignal).addEventListener === 'function') (signal as AbortSignal).addEventListener('abort', fn, { once: true })
  else (signal as Exclude<ClientSignal, AbortSignal>).on('abort', fn)
}
