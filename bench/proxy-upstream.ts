// The benchmark's upstream (own process): a keep-alive HTTPS server on loopback with its own CA.
//   POST /v1/messages  → small JSON answer
//   GET  /v1/stream    → SSE, ~2 KB in 20 events (Anthropic-style usage in message_delta), 1 ms apart
//   GET  /v1/hold      → SSE that sends one event and stays open until the client leaves
//   GET  /v1/ws        → WebSocket upgrade: every message echoed
//   POST /mcp          → a JSON-RPC tools/call result for id 1 (the MCP phase)
// and a second port speaking HTTP/2 only (ALPN h2: the h2 phase), POST /v1/messages as above.
// Both answer for 127.0.0.1 and, by SNI, for BENCH_NAME (the transparent mode's name).
// Prints `READY <port> <h2 port>` once listening. Argument: directory for the CA.
import { createSecureServer } from 'node:http2'
import { createServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { createSecureContext } from 'node:tls'
import { WebSocketServer } from 'ws'
import { LeafMinter, loadOrCreateCa } from '../src/proxy/ca.js'
import { BENCH_NAME } from './proxy-load.js'

const dir = process.argv[2]!
const ca = await loadOrCreateCa(dir)
const minter = new LeafMinter(ca)
const pem = await minter.pemFor('127.0.0.1')
const named = createSecureContext(await minter.pemFor(BENCH_NAME))
const plain = createSecureContext(pem)
const SNICallback = (name: string, cb: (err: Error | null, ctx: ReturnType<typeof createSecureContext>) => void): void => cb(null, name === BENCH_NAME ? named : plain)
const pad = 'x'.repeat(80)
const ev = (event: string, data: unknown): string => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`

const server = createServer({ ...pem, SNICallback, keepAlive: true }, (req, res) => {
  if (req.method === 'POST') {
    let n = 0
    req.on('data', (c: Buffer) => (n += c.length))
    req.on('end', () => {
      const body = req.url === '/mcp'
        ? JSON.stringify({ jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: `issue opened (${n} bytes)` }] } })
        : JSON.stringify({ id: 'msg_1', received: n, usage: { input_tokens: 12, output_tokens: 3 } })
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
      res.end(body)
    })
    return
  }
  req.resume()
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
  res.write(ev('message_start', { type: 'message_start', message: { usage: { input_tokens: 10, output_tokens: 1 } } }))
  if (req.url === '/v1/hold') return // held open; ends when the client disconnects
  let i = 0
  const timer = setInterval(() => {
    if (++i < 18) res.write(ev('content_block_delta', { type: 'content_block_delta', delta: { text: pad } }))
    else {
      clearInterval(timer)
      res.write(ev('message_delta', { type: 'message_delta', usage: { output_tokens: 120 } }))
      res.end(ev('message_stop', { type: 'message_stop' }))
    }
  }, 1)
  res.on('close', () => clearInterval(timer))
})
const wss = new WebSocketServer({ server, path: '/v1/ws', perMessageDeflate: false })
wss.on('connection', (ws) => ws.on('message', (d, binary) => ws.send(d, { binary })))
server.keepAliveTimeout = 60_000
server.maxConnections = 10_000
const h2 = createSecureServer({ ...pem, SNICallback, settings: { maxConcurrentStreams: 1000 } })
h2.on('stream', (stream) => {
  let n = 0
  stream.on('data', (c: Buffer) => (n += c.length))
  stream.on('end', () => {
    const body = JSON.stringify({ id: 'msg_1', received: n, usage: { input_tokens: 12, output_tokens: 3 } })
    stream.respond({ ':status': 200, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
    stream.end(body)
  })
  stream.on('error', () => {})
})
server.listen(0, '127.0.0.1', () => h2.listen(0, '127.0.0.1', () =>
  process.stdout.write(`READY ${(server.address() as AddressInfo).port} ${(h2.address() as AddressInfo).port}\n`)))
