// The h2 phase of bench:proxy: requests per second on ONE HTTP/2 connection with many streams in
// flight, POST /v1/messages (the same body and policy as the HTTP/1.1 phase) to the upstream's
// h2-only port. Directly, or through a proxy's tunnel: CONNECT, then TLS with ALPN `h2` only, so
// a proxy that does not offer h2 on its intercepted leg fails the phase instead of falling back.
import { connect as h2connect, type ClientHttp2Session } from 'node:http2'
import { connect as netConnect, type Socket } from 'node:net'
import { connect as tlsConnect, type TLSSocket } from 'node:tls'
import { POST_BODY, closedLoop, type LoopResult } from './proxy-load.js'

export interface Via {
  /** The proxy's URL, token (absent for a proxy that asks none) and CA; absent: straight to the upstream. */
  proxy?: { url: string; token?: string; caPem: string }
  upstreamCaPem: string
}

/** A CONNECT to `target` through the proxy at `url`: the raw socket once it answered 200. */
export async function connectTunnel(url: string, target: string, token?: string): Promise<Socket> {
  const p = new URL(url)
  const raw = netConnect(Number(p.port), p.hostname)
  await new Promise<void>((resolve, reject) => {
    raw.once('connect', () => raw.write(`CONNECT ${target} HTTP/1.1\r\nhost: ${target}\r\n${token ? `proxy-authorization: Bearer ${token}\r\n` : ''}\r\n`))
    let head = ''
    const onData = (d: Buffer): void => {
      head += d.toString('latin1')
      const end = head.indexOf('\r\n\r\n')
      if (end < 0) return
      raw.off('data', onData)
      if (end + 4 < head.length) raw.unshift(Buffer.from(head.slice(end + 4), 'latin1'))
      if (head.startsWith('HTTP/1.1 200') || head.startsWith('HTTP/1.0 200')) resolve()
      else reject(new Error(head.split('\r\n')[0]))
    }
    raw.on('data', onData)
    raw.once('error', reject)
  })
  return raw
}

async function open(port: number, via: Via): Promise<ClientHttp2Session> {
  const authority = `https://127.0.0.1:${port}`
  let session: ClientHttp2Session
  if (!via.proxy) session = h2connect(authority, { ca: via.upstreamCaPem })
  else {
    const raw = await connectTunnel(via.proxy.url, `127.0.0.1:${port}`, via.proxy.token)
    const tls = await new Promise<TLSSocket>((resolve, reject) => {
      const t = tlsConnect({ socket: raw, host: '127.0.0.1', ALPNProtocols: ['h2'], ca: via.proxy!.caPem }, () => resolve(t))
      t.once('error', reject)
    })
    if (tls.alpnProtocol !== 'h2') {
      tls.destroy()
      throw new Error(`the proxy's intercepted leg did not negotiate h2 (ALPN ${String(tls.alpnProtocol)})`)
    }
    session = h2connect(authority, { createConnection: () => tls })
  }
  await new Promise<void>((resolve, reject) => {
    session.once('connect', () => resolve())
    session.once('error', reject)
  })
  session.on('error', () => {})
  return session
}

function h2post(session: ClientHttp2Session): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = session.request({ ':method': 'POST', ':path': '/v1/messages', 'content-type': 'application/json' })
    let status = 0
    req.on('response', (h) => (status = Number(h[':status'])))
    req.on('data', () => {})
    req.on('end', () => (status === 200 ? resolve() : reject(new Error(`h2 POST ${status}`))))
    req.on('error', reject)
    req.end(POST_BODY)
  })
}

/** `streams` streams in flight on one connection for `seconds`: requests/s, latency per request, the target's CPU per request. */
export async function measureH2(port: number, via: Via, o: { seconds: number; streams: number; pids?: number[] }): Promise<LoopResult> {
  const session = await open(port, via)
  try {
    return await closedLoop(() => h2post(session), { seconds: o.seconds, concurrency: o.streams, warm: 2, ...(o.pids ? { pids: o.pids } : {}) })
  } finally {
    session.destroy()
  }
}
