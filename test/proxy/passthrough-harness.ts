// SNI passthrough on real sockets: an HTTPS upstream whose certificate names `localhost` (from the
// harness's upstream CA, which a pinned client trusts and the corral CA is not), and a TLS client
// inside a CONNECT tunnel that sends the SNI it is given.
import { createServer, type Server } from 'node:https'
import type { AddressInfo, Socket } from 'node:net'
import { join } from 'node:path'
import { connect as tlsConnect, type TLSSocket } from 'node:tls'
import { LeafMinter, loadOrCreateCa } from '../../src/proxy/ca.js'
import { openTunnel } from '../helpers/raw-socket.js'
import type { Harness } from './harness.js'

export async function startPinnedUpstream(h: Harness): Promise<{ server: Server; port: number; caPem: string; connections: number; close(): Promise<void> }> {
  const ca = await loadOrCreateCa(join(h.dir, 'upstream-ca'))
  const server = createServer(await new LeafMinter(ca).pemFor('localhost'), (req, res) => res.end(`pinned upstream: ${req.url}`))
  const out = { server, port: 0, caPem: ca.certPem, connections: 0, close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()) }) }
  server.on('secureConnection', () => out.connections++)
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  out.port = (server.address() as AddressInfo).port
  return out
}

/** TLS inside a CONNECT to `target`, with `servername` as SNI (undefined: none sent), trusting only `caPem`. */
export async function tlsThrough(h: Harness, target: string, token: string, servername: string | undefined, caPem: string): Promise<TLSSocket> {
  const { socket } = await openTunnel(Number(new URL(h.proxyUrl).port), target, token)
  return new Promise((resolve, reject) => {
    const t = tlsConnect({ socket: socket as Socket, host: 'localhost', ca: caPem, ...(servername === undefined ? { servername: '' } : { servername }), checkServerIdentity: () => undefined }, () => resolve(t))
    t.once('error', reject)
    t.once('close', () => reject(new Error('closed before the handshake')))
  })
}

/** One HTTP/1.1 request on an open TLS socket; the whole answer once the server closes. */
export function httpOver(t: TLSSocket, path: string): Promise<string> {
  return new Promise((resolve) => {
    let text = ''
    t.on('data', (c: Buffer) => (text += c.toString('latin1')))
    t.once('close', () => resolve(text))
    t.write(`GET ${path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n`)
  })
}
