// Raw-socket clients for attack tests: the exact bytes of a CONNECT authority, a request target or
// a Host header reach the proxy as written (fetch and undici would canonicalize them first).
import { connect as netConnect } from 'node:net'
import { connect as tlsConnect } from 'node:tls'

export interface RawResponse {
  status: number
  headers: Record<string, string>
  body: string
}

function parse(text: string): RawResponse {
  const end = text.indexOf('\r\n\r\n')
  const head = end < 0 ? text : text.slice(0, end)
  const [statusLine, ...lines] = head.split('\r\n')
  const headers: Record<string, string> = {}
  for (const l of lines) {
    const i = l.indexOf(':')
    if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim()
  }
  let body = end < 0 ? '' : text.slice(end + 4)
  if (headers['transfer-encoding'] === 'chunked') {
    let out = ''
    for (let rest = body; rest.length > 0; ) {
      const nl = rest.indexOf('\r\n')
      const n = parseInt(rest.slice(0, nl), 16)
      if (!n) break
      out += rest.slice(nl + 2, nl + 2 + n)
      rest = rest.slice(nl + 2 + n + 2)
    }
    body = out
  }
  return { status: Number(statusLine?.split(' ')[1] ?? 0), headers, body }
}

/** Reads a socket to its end (bounded by `timeoutMs`). */
function readAll(sock: NodeJS.ReadableStream & { destroy(): void }, timeoutMs: number): Promise<string> {
  return new Promise((resolve) => {
    let buf = ''
    const t = setTimeout(() => {
      sock.destroy()
      resolve(buf)
    }, timeoutMs)
    sock.on('data', (d: Buffer) => (buf += d.toString('latin1')))
    sock.on('end', () => (clearTimeout(t), resolve(buf)))
    sock.on('close', () => (clearTimeout(t), resolve(buf)))
    sock.on('error', () => (clearTimeout(t), resolve(buf)))
  })
}

/**
 * `CONNECT authority` with the token, then TLS (trusting `caPem`, SNI `sni` when given), then one
 * request with `target` and `host` as written. A refused CONNECT is returned as the response.
 * `proxyAuthorization` replaces the `Bearer` header line as written (null: no such line at all).
 */
export async function connectRequest(o: {
  proxyPort: number; authority: string; token: string; caPem: string; target: string; host?: string; sni?: string
  method?: string; headers?: Record<string, string>; body?: string; timeoutMs?: number; proxyAuthorization?: string | null
}): Promise<RawResponse> {
  const sock = netConnect(o.proxyPort, '127.0.0.1')
  await new Promise<void>((r, j) => sock.once('connect', r).once('error', j))
  const auth = o.proxyAuthorization === undefined ? `Proxy-Authorization: Bearer ${o.token}\r\n` : o.proxyAuthorization === null ? '' : `${o.proxyAuthorization}\r\n`
  sock.write(`CONNECT ${o.authority} HTTP/1.1\r\nHost: ${o.authority}\r\n${auth}\r\n`)
  const first = await new Promise<string>((resolve) => {
    let buf = ''
    const onData = (d: Buffer) => {
      buf += d.toString('latin1')
      if (buf.includes('\r\n\r\n')) {
        sock.off('data', onData)
        resolve(buf)
      }
    }
    sock.on('data', onData)
    sock.once('close', () => resolve(buf))
  })
  if (!first.startsWith('HTTP/1.1 200')) {
    sock.destroy()
    return parse(first)
  }
  const tls = tlsConnect({ socket: sock, ca: o.caPem, ...(o.sni ? { servername: o.sni } : {}), checkServerIdentity: () => undefined })
  await new Promise<void>((r, j) => tls.once('secureConnect', r).once('error', j))
  const body = o.body ?? ''
  const extra = Object.entries(o.headers ?? {}).map(([k, v]) => `${k}: ${v}\r\n`).join('')
  tls.write(`${o.method ?? 'GET'} ${o.target} HTTP/1.1\r\nHost: ${o.host ?? o.authority}\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`)
  return parse(await readAll(tls, o.timeoutMs ?? 10_000))
}

/**
 * A plain-HTTP proxy request with the request target as written (absolute-form). `proxyAuthorization`
 * replaces the `Bearer` header line as written (null: no such line at all).
 */
export async function plainRequest(o: { proxyPort: number; target: string; token: string; host?: string; timeoutMs?: number; method?: string; proxyAuthorization?: string | null }): Promise<RawResponse> {
  const sock = netConnect(o.proxyPort, '127.0.0.1')
  await new Promise<void>((r, j) => sock.once('connect', r).once('error', j))
  const host = o.host ?? new URL(o.target).host
  const auth = o.proxyAuthorization === undefined ? `Proxy-Authorization: Bearer ${o.token}\r\n` : o.proxyAuthorization === null ? '' : `${o.proxyAuthorization}\r\n`
  sock.write(`${o.method ?? 'GET'} ${o.target} HTTP/1.1\r\nHost: ${host}\r\n${auth}Connection: close\r\n\r\n`)
  return parse(await readAll(sock, o.timeoutMs ?? 10_000))
}
