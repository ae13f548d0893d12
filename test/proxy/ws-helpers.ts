// WebSocket pieces for the proxy tests: a real `ws` upstream on the harness's HTTPS and HTTP
// servers (behaviour chosen by path), and `ws` clients that reach it through the proxy the way an
// agent does: inside a CONNECT tunnel with the corral CA, or as a plain absolute-URI upgrade.
import { createHash } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { connect, type Socket } from 'node:net'
import { WebSocket, WebSocketServer } from 'ws'
import { connect as tlsConnect, type TLSSocket } from 'node:tls'
import { openTunnel } from '../helpers/raw-socket.js'
import type { Harness } from './harness.js'

export interface WsUpstream {
  /** Headers of the last upgrade the upstream accepted. */
  last: { headers: IncomingMessage['headers']; url: string }
  /** Close codes the upstream received, in order. */
  closes: number[]
  /** A test's own behaviour for a path (replaces the built-in ones below). */
  paths: Map<string, (ws: WebSocket, req: IncomingMessage) => void>
  close(): void
}

/**
 * Paths: /echo (every message back, same type), /headers (first message: the upgrade's headers as
 * JSON), /usage (each message answered with a Responses `response.completed` event of 40 tokens),
 * /vanish (the socket destroyed after the first message), /refuse (HTTP 403 with a body, no 101),
 * /deflate and /badproto (a 101 naming compression or a subprotocol nobody offered), /masked (a
 * server that masks its frames), /big (a
 * 4 KiB message on open).
 */
export function wsUpstream(h: Harness): WsUpstream {
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false })
  const state: WsUpstream = { last: { headers: {}, url: '' }, closes: [], paths: new Map(), close: () => wss.close() }
  const onUpgrade = (req: IncomingMessage, socket: Socket, head: Buffer): void => {
    const path = (req.url ?? '').split('?')[0]
    if (path === '/masked') {
      // A server that masks its frames (RFC 6455 5.1: a client must close on that).
      const accept = createHash('sha1').update(`${String(req.headers['sec-websocket-key'])}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64')
      const payload = Buffer.from('masked by the server')
      const mask = Buffer.from([1, 2, 3, 4])
      const frame = Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, Buffer.from(payload.map((b, i) => b ^ mask[i % 4]!))])
      socket.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: ${accept}\r\n\r\n`)
      setTimeout(() => socket.write(frame), 50)
      // Read (and drop) what comes back, so the proxy's close ends this socket and the server can close.
      socket.on('error', () => {}).resume()
      return
    }
    if (path === '/deflate' || path === '/badproto') {
      // A 101 that agrees to what the proxy never offered: compression, or a subprotocol.
      const accept = createHash('sha1').update(`${String(req.headers['sec-websocket-key'])}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64')
      const extra = path === '/deflate' ? 'sec-websocket-extensions: permessage-deflate\r\n' : 'sec-websocket-protocol: admin\r\n'
      socket.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: ${accept}\r\n${extra}\r\n`)
      socket.on('error', () => {}).resume()
      return
    }
    if (path === '/refuse') {
      const body = `refused: ${String(req.headers['x-api-key'] ?? '')}`
      socket.end(`HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`)
      return
    }
    state.last = { headers: req.headers, url: req.url ?? '' }
    wss.handleUpgrade(req, socket, head, (ws) => {
      ws.on('close', (code) => state.closes.push(code))
      ws.on('error', () => {})
      const own = state.paths.get(path ?? '')
      if (own) return own(ws, req)
      if (path === '/headers') ws.send(JSON.stringify(req.headers))
      if (path === '/big') ws.send(Buffer.alloc(4096, 0x61).toString())
      ws.on('message', (data, isBinary) => {
        if (path === '/echo') ws.send(data, { binary: isBinary })
        else if (path === '/usage') ws.send(JSON.stringify({ type: 'response.completed', response: { usage: { total_tokens: 40 } } }))
        else if (path === '/vanish') socket.destroy()
        else if (path === '/headers') ws.send(JSON.stringify(req.headers))
      })
    })
  }
  h.up.https.on('upgrade', onUpgrade)
  h.up.http.on('upgrade', onUpgrade)
  return state
}

/** A `ws` client inside a CONNECT tunnel (the corral CA trusted), to the harness's HTTPS upstream. */
export async function wsTunnel(h: Harness, token: string, path: string, opts: { headers?: Record<string, string>; protocols?: string[]; deflate?: boolean; target?: string } = {}): Promise<WebSocket> {
  const target = opts.target ?? `127.0.0.1:${h.up.httpsPort}`
  const { socket } = await openTunnel(Number(new URL(h.proxyUrl).port), target, token)
  // No SNI for an IP target: the leaf is the CONNECT target's, and Host agrees with it.
  const tls = await new Promise<TLSSocket>((resolve, reject) => {
    const t = tlsConnect({ socket, host: target.replace(/:\d+$/, ''), ca: h.proxy.ca.certPem, ALPNProtocols: ['http/1.1'] }, () => resolve(t))
    t.once('error', reject)
  })
  return new WebSocket(`wss://${target}${path}`, opts.protocols ?? [], { createConnection: () => tls, headers: opts.headers ?? {}, perMessageDeflate: opts.deflate ?? false })
}

/** A `ws` client sending a plain absolute-URI upgrade (`GET http://host/path`) to the proxy. */
export function wsPlain(h: Harness, token: string | undefined, path: string): WebSocket {
  const target = `127.0.0.1:${h.up.httpPort}`
  return new WebSocket(`ws://${target}${path}`, {
    createConnection: () => connect(Number(new URL(h.proxyUrl).port), '127.0.0.1'),
    headers: token ? { 'proxy-authorization': `Bearer ${token}` } : {},
    perMessageDeflate: false,
    // The request line names the upstream in absolute form, as a forward proxy expects.
    finishRequest: (req) => {
      req.path = `http://${target}${path}`
      req.end()
    },
  })
}

/** Resolves once the socket is open, or with the status of the HTTP answer that refused it. */
export function opened(ws: WebSocket): Promise<{ open: true } | { open: false; status: number; body: string; reason: string }> {
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ open: true }))
    ws.once('unexpected-response', (_req, res) => {
      let body = ''
      res.on('data', (c: Buffer) => (body += c.toString()))
      res.on('end', () => resolve({ open: false, status: res.statusCode ?? 0, body, reason: String(res.headers['x-corral-deny-reason'] ?? '') }))
    })
    ws.once('error', reject)
  })
}

export function nextMessage(ws: WebSocket): Promise<{ data: Buffer; binary: boolean }> {
  return new Promise((resolve) => ws.once('message', (data, binary) => resolve({ data: data as Buffer, binary })))
}

export function closed(ws: WebSocket): Promise<{ code: number; reason: string }> {
  return new Promise((resolve) => {
    if (ws.readyState === WebSocket.CLOSED) resolve({ code: 1006, reason: '' })
    ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() }))
  })
}
