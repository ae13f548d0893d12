// The floor of a TLS-intercepting proxy written in Node (bench/proxy.ts, peer `node-floor`): what
// the runtime alone costs, with no policy, no audit, no token. CONNECT → TLS with one leaf of the
// bench CA → node:http on the decrypted stream → undici to the upstream → the answer back. corral's
// cost over this floor is its own; the floor's over squid ssl-bump is Node's.
// It offers h2 by ALPN next to http/1.1 like corral (an h2 stream goes upstream over one h2 session
// per origin, node:http2) and relays a WebSocket upgrade as bytes once the upstream answered 101.
// Arguments: the CA directory to write (ca.pem), the upstream CA file. Prints `READY <port>`.
import { readFileSync } from 'node:fs'
import { createServer, type IncomingHttpHeaders, type IncomingMessage } from 'node:http'
import { connect as h2connect, createServer as createH2Server, type ClientHttp2Session, type IncomingHttpHeaders as H2Headers, type ServerHttp2Stream } from 'node:http2'
import type { AddressInfo, Socket } from 'node:net'
import { TLSSocket, connect as tlsConnect, createSecureContext } from 'node:tls'
import { Agent } from 'undici'
import { LeafMinter, loadOrCreateCa } from '../src/proxy/ca.js'

const [caDir, upCaFile] = process.argv.slice(2) as [string, string]
const ca = await loadOrCreateCa(caDir)
const secureContext = createSecureContext(await new LeafMinter(ca).pemFor('127.0.0.1'))
const upCa = readFileSync(upCaFile, 'utf8')
const upstream = new Agent({ connect: { ca: upCa }, connections: 64 })

const HOP = new Set(['connection', 'keep-alive', 'proxy-authorization', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host'])
const forwardable = (h: IncomingHttpHeaders): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(h)) if (!HOP.has(k) && typeof v === 'string') out[k] = v
  return out
}

const inner = createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
  const chunks: Buffer[] = []
  req.on('data', (c: Buffer) => chunks.push(c))
  req.on('end', () => {
    const origin = `https://${(req.socket as TLSSocket & { target?: string }).target}`
    upstream.request({ origin, path: req.url!, method: req.method as 'POST', headers: forwardable(req.headers), body: Buffer.concat(chunks) }).then(async (up) => {
      const headers: Record<string, string> = {}
      for (const [k, v] of Object.entries(up.headers)) if (!HOP.has(k) && typeof v === 'string') headers[k] = v
      res.writeHead(up.statusCode, headers)
      for await (const c of up.body) res.write(c)
      res.end()
    }, () => {
      res.writeHead(502).end()
    })
  })
})

// WebSocket: the upgrade request's head to the upstream as it came, then bytes both ways.
inner.on('upgrade', (req: IncomingMessage, client: Socket, head: Buffer) => {
  const [host, port] = (req.socket as TLSSocket & { target?: string }).target!.split(':') as [string, string]
  const up = tlsConnect({ host, port: Number(port), ca: upCa }, () => {
    let lines = `${req.method} ${req.url} HTTP/1.1\r\n`
    for (let i = 0; i < req.rawHeaders.length; i += 2) lines += `${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\r\n`
    up.write(`${lines}\r\n`)
    if (head.length) up.write(head)
    up.pipe(client).pipe(up)
  })
  up.on('error', () => client.destroy())
  client.on('error', () => up.destroy())
})

const sessions = new Map<string, ClientHttp2Session>()
const h2upstream = (target: string): ClientHttp2Session => {
  let s = sessions.get(target)
  if (!s || s.closed || s.destroyed) {
    s = h2connect(`https://${target}`, { ca: upCa })
    s.on('error', () => sessions.delete(target))
    s.on('close', () => sessions.delete(target))
    sessions.set(target, s)
  }
  return s
}
const H2_DROP = new Set([...HOP, ':authority', ':method', ':path', ':scheme'])
const h2inner = createH2Server({ settings: { maxConcurrentStreams: 1000 } })
h2inner.on('stream', (stream: ServerHttp2Stream, headers: H2Headers) => {
  const target = (stream.session!.socket as TLSSocket & { target?: string }).target!
  const out: Record<string, string> = { ':method': String(headers[':method']), ':path': String(headers[':path']) }
  for (const [k, v] of Object.entries(headers)) if (!H2_DROP.has(k) && typeof v === 'string') out[k] = v
  const up = h2upstream(target).request(out)
  stream.pipe(up)
  up.on('response', (h) => {
    const back: Record<string, string | number> = { ':status': Number(h[':status']) }
    for (const [k, v] of Object.entries(h)) if (!k.startsWith(':') && !HOP.has(k) && typeof v === 'string') back[k] = v
    stream.respond(back)
    up.pipe(stream)
  })
  up.on('error', () => stream.destroyed || stream.close())
  stream.on('error', () => up.close())
})

const front = createServer()
front.on('connect', (req, socket: Socket) => {
  socket.write('HTTP/1.1 200 Connection Established\r\n\r\n')
  const tls = new TLSSocket(socket, { isServer: true, secureContext, ALPNProtocols: ['h2', 'http/1.1'] }) as TLSSocket & { target?: string; secureConnecting: boolean }
  tls.target = req.url!
  tls.on('error', () => tls.destroy())
  tls.once('secure', () => {
    if (tls.alpnProtocol !== 'h2') return void inner.emit('connection', tls)
    // A TLSSocket made by hand keeps `secureConnecting` after its handshake; node:http2 would wait for it.
    tls.secureConnecting = false
    h2inner.emit('connection', tls)
  })
})
front.listen(0, '127.0.0.1', () => process.stdout.write(`READY ${(front.address() as AddressInfo).port}\n`))
// A clean exit on SIGTERM, so --cpu-prof (CORRAL_BENCH_PROFILE=1) writes its profile.
process.on('SIGTERM', () => process.exit(0))
