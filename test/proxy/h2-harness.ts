// HTTP/2 on real sockets for the proxy's h2 suites: an h2 upstream (TLS from the harness's
// upstream CA, which the proxy trusts; HTTP/1.1 allowed beside it, as real servers do) and a
// node:http2 client session inside a CONNECT tunnel, trusting the corral CA.
import { connect as h2connect, createSecureServer, type ClientHttp2Session, type Http2SecureServer, type Http2ServerRequest, type Http2ServerResponse, type IncomingHttpHeaders } from 'node:http2'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { connect as tlsConnect } from 'node:tls'
import { LeafMinter, loadOrCreateCa } from '../../src/proxy/ca.js'
import { openTunnel } from '../helpers/raw-socket.js'
import type { Harness } from './harness.js'

export type H2Handler = (req: Http2ServerRequest, res: Http2ServerResponse) => void

export interface H2Upstream {
  server: Http2SecureServer
  port: number
  handler: { current: H2Handler }
  close(): Promise<void>
}

/** An h2 upstream on loopback with a certificate from the harness's upstream CA. */
export async function startH2Upstream(h: Harness, opts: { h2Only?: boolean } = {}): Promise<H2Upstream> {
  const minter = new LeafMinter(await loadOrCreateCa(join(h.dir, 'upstream-ca')))
  const handler: { current: H2Handler } = { current: (_req, res) => res.end('ok') }
  const server = createSecureServer({ ...(await minter.pemFor('127.0.0.1')), allowHTTP1: !opts.h2Only }, (req, res) => handler.current(req, res))
  const sessions = new Set<import('node:http2').ServerHttp2Session>()
  server.on('session', (s) => {
    sessions.add(s)
    s.once('close', () => sessions.delete(s))
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    server, handler,
    port: (server.address() as AddressInfo).port,
    async close() {
      for (const s of sessions) s.destroy()
      await new Promise((r) => server.close(r))
    },
  }
}

/** An h2 client session to `target` (host:port) through a CONNECT tunnel of the proxy. */
export async function h2Through(h: Harness, target: string, token: string): Promise<ClientHttp2Session> {
  const port = Number(new URL(h.proxyUrl).port)
  const { socket } = await openTunnel(port, target, token)
  const host = target.replace(/:\d+$/, '')
  const session = h2connect(`https://${target}`, {
    createConnection: () => tlsConnect({ socket, host, ...(/^[\d.]+$/.test(host) ? {} : { servername: host }), ca: h.proxy.ca.certPem, ALPNProtocols: ['h2'] }),
  })
  session.on('error', () => {})
  await new Promise<void>((resolve, reject) => {
    session.once('connect', () => resolve())
    session.once('error', reject)
  })
  return session
}

export interface H2Answer {
  status: number
  headers: IncomingHttpHeaders
  body: string
  trailers: IncomingHttpHeaders
  rstCode?: number
}

/** One request on a session: status, headers, body and trailers once the stream ends. */
export function h2Request(session: ClientHttp2Session, headers: Record<string, string>, body?: string | Buffer): Promise<H2Answer> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ':method': 'GET', ...headers }, { endStream: body === undefined })
    const out: H2Answer = { status: 0, headers: {}, body: '', trailers: {} }
    const chunks: Buffer[] = []
    stream.on('response', (hd) => {
      out.status = Number(hd[':status'])
      out.headers = hd
    })
    stream.on('trailers', (t) => (out.trailers = t))
    stream.on('data', (c: Buffer) => chunks.push(c))
    stream.on('error', (err) => (out.status ? resolve({ ...out, body: Buffer.concat(chunks).toString(), rstCode: stream.rstCode }) : reject(err)))
    stream.on('close', () => resolve({ ...out, body: Buffer.concat(chunks).toString(), rstCode: stream.rstCode }))
    if (body !== undefined) stream.end(body)
  })
}
