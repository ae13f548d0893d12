// A tiny real HTTP server on loopback that speaks the /v1 wire format (JSON bodies, the error
// envelope, SSE), for client tests that need exact control over status codes and headers.
// Every request is recorded so tests can assert what the client actually sent.

import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface Recorded {
  method: string
  path: string
  query: URLSearchParams
  headers: IncomingMessage['headers']
  body: unknown
}

export type Handler = (req: Recorded, res: ServerResponse) => void | Promise<void>

export interface LoopbackApi {
  url: string
  requests: Recorded[]
  /** Routes are "METHOD /path" (path without query); unmatched requests get a 404 envelope. */
  route(key: string, handler: Handler): void
  close(): Promise<void>
}

export function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers })
  res.end(JSON.stringify(body))
}

export function envelope(res: ServerResponse, status: number, code: string, message: string, extra: Record<string, string> = {}): void {
  json(res, status, { error: { code, message, request_id: `req_${status}` } }, { 'x-request-id': `req_${status}`, ...extra })
}

export async function startLoopbackApi(): Promise<LoopbackApi> {
  const routes = new Map<string, Handler>()
  const requests: Recorded[] = []
  const sockets = new Set<import('node:net').Socket>()
  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://loopback')
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const text = Buffer.concat(chunks).toString('utf8')
    const recorded: Recorded = {
      method: req.method ?? 'GET',
      path: url.pathname,
      query: url.searchParams,
      headers: req.headers,
      body: text ? JSON.parse(text) : undefined,
    }
    requests.push(recorded)
    const handler = routes.get(`${recorded.method} ${recorded.path}`)
    if (!handler) return envelope(res, 404, 'not_found', `no route ${recorded.method} ${recorded.path}`)
    await handler(recorded, res)
  })
  server.on('connection', (s) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    route: (key, handler) => void routes.set(key, handler),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      }),
  }
}
