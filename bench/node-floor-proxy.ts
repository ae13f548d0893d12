// The floor of a TLS-intercepting proxy written in Node (bench/proxy.ts, peer `node-floor`): what
// the runtime alone costs, with no policy, no audit, no token. CONNECT → TLS with one leaf of the
// bench CA → node:http on the decrypted stream → undici to the upstream → the answer back. corral's
// cost over this floor is its own; the floor's over squid ssl-bump is Node's.
// Arguments: the CA directory to write (ca.pem), the upstream CA file. Prints `READY <port>`.
import { readFileSync } from 'node:fs'
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { TLSSocket, createSecureContext } from 'node:tls'
import { Agent } from 'undici'
import { LeafMinter, loadOrCreateCa } from '../src/proxy/ca.js'

const [caDir, upCaFile] = process.argv.slice(2) as [string, string]
const ca = await loadOrCreateCa(caDir)
const secureContext = createSecureContext(await new LeafMinter(ca).pemFor('127.0.0.1'))
const upstream = new Agent({ connect: { ca: readFileSync(upCaFile, 'utf8') }, connections: 64 })

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

const front = createServer()
front.on('connect', (req, socket: Socket) => {
  socket.write('HTTP/1.1 200 Connection Established\r\n\r\n')
  const tls = new TLSSocket(socket, { isServer: true, secureContext }) as TLSSocket & { target?: string }
  tls.target = req.url!
  tls.on('error', () => tls.destroy())
  inner.emit('connection', tls)
})
front.listen(0, '127.0.0.1', () => process.stdout.write(`READY ${(front.address() as AddressInfo).port}\n`))
// A clean exit on SIGTERM, so --cpu-prof (CORRAL_BENCH_PROFILE=1) writes its profile.
process.on('SIGTERM', () => process.exit(0))
