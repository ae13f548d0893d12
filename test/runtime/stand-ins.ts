import http from 'node:http'
import net from 'node:net'
import type { AddressInfo } from 'node:net'

/**
 * An HTTP server on the host (all interfaces, so the host's LAN address is also tried): the
 * "internet" a workspace must not reach directly.
 */
export async function startTarget(body = 'hello from outside'): Promise<{ port: number; hits: string[]; close: () => Promise<void> }> {
  const hits: string[] = []
  const server = http.createServer((req, res) => {
    hits.push(`${req.method} ${req.url}`)
    res.setHeader('content-type', 'text/plain')
    res.end(body)
  })
  await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve))
  return {
    port: (server.address() as AddressInfo).port,
    hits,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()) }),
  }
}

export interface SeenRequest {
  method: string
  url: string
  proxyAuthorization?: string
}

/**
 * Stands in for corral's policy proxy in runtime tests: a plain forward proxy (absolute-URI
 * requests and CONNECT) that records what it saw, including Proxy-Authorization.
 */
export async function startStandInProxy(): Promise<{ port: number; seen: SeenRequest[]; close: () => Promise<void> }> {
  const seen: SeenRequest[] = []
  const server = http.createServer((req, res) => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', proxyAuthorization: req.headers['proxy-authorization'] })
    const target = new URL(req.url ?? '/')
    const headers = { ...req.headers }
    delete headers['proxy-authorization']
    delete headers['proxy-connection']
    const upstream = http.request({ host: target.hostname, port: target.port, path: `${target.pathname}${target.search}`, method: req.method, headers }, (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers)
      up.pipe(res)
    })
    upstream.on('error', () => { res.statusCode = 502; res.end() })
    req.pipe(upstream)
  })
  server.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    seen.push({ method: 'CONNECT', url: req.url ?? '', proxyAuthorization: req.headers['proxy-authorization'] })
    const [host, port] = (req.url ?? '').split(':')
    const upstream = net.connect(Number(port), host, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n')
      upstream.write(head)
      upstream.pipe(client)
      client.pipe(upstream)
    })
    upstream.on('error', () => client.destroy())
    client.on('error', () => upstream.destroy())
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()) }),
  }
}
