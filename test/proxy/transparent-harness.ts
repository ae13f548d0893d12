// Transparent egress through the real proxy on loopback: an HTTPS and HTTP upstream answering for
// any name (leaves minted per SNI from their own CA), the workspace's DNS stream, and CONNECTs
// made the way the sandbox's listener makes them (src/runtime/sandbox-init.ts).
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https'
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http'
import { connect, type AddressInfo, type Socket } from 'node:net'
import { join } from 'node:path'
import dnsPacket from 'dns-packet'
import { LeafMinter, loadOrCreateCa } from '../../src/proxy/ca.js'

export interface NamedUpstreams {
  httpsPort: number
  httpPort: number
  caPem: string
  hits: string[]
  close(): Promise<void>
}

/** HTTPS (any SNI) and HTTP upstreams on loopback that record `host path` of each request. */
export async function startNamedUpstreams(dir: string): Promise<NamedUpstreams> {
  const ca = await loadOrCreateCa(join(dir, 'named-upstream-ca'))
  const minter = new LeafMinter(ca)
  const hits: string[] = []
  const handler = (req: { headers: { host?: string }; url?: string }, res: { end(b: string): void }) => {
    hits.push(`${String(req.headers.host).replace(/:\d+$/, '')} ${req.url}`)
    res.end(`hello ${String(req.headers.host).replace(/:\d+$/, '')}`)
  }
  const https: HttpsServer = createHttpsServer({
    ...(await minter.pemFor('127.0.0.1')),
    SNICallback: (name, cb) => { minter.contextFor(name).then((c) => cb(null, c), (e: Error) => cb(e)) },
  }, handler)
  const http: HttpServer = createHttpServer(handler)
  await new Promise<void>((r) => https.listen(0, '127.0.0.1', r))
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r))
  return {
    httpsPort: (https.address() as AddressInfo).port,
    httpPort: (http.address() as AddressInfo).port,
    caPem: ca.certPem,
    hits,
    async close() {
      https.closeAllConnections(); http.closeAllConnections()
      await Promise.all([new Promise((r) => https.close(r)), new Promise((r) => http.close(r))])
    },
  }
}

/** A CONNECT as the sandbox's listener sends it; resolves with the socket and the proxy's status line. */
export function egressConnect(proxyPort: number, target: string, token: string, marked: boolean | 'udp' = true): Promise<{ socket: Socket; status: string; rest: string }> {
  return new Promise((resolve, reject) => {
    const s = connect(proxyPort, '127.0.0.1', () => {
      s.write(`CONNECT ${target} HTTP/1.1\r\nhost: ${target}\r\nproxy-authorization: Bearer ${token}\r\n${marked ? `x-corral-egress: ${marked === true ? 'transparent' : marked}\r\n` : ''}\r\n`)
    })
    let buf = Buffer.alloc(0)
    const onData = (c: Buffer): void => {
      buf = Buffer.concat([buf, c])
      const end = buf.indexOf('\r\n\r\n')
      if (end < 0) return
      s.off('data', onData)
      s.pause()
      const rest = buf.subarray(end + 4)
      if (rest.length) s.unshift(rest)
      resolve({ socket: s, status: buf.subarray(0, buf.indexOf('\r\n')).toString('latin1'), rest: rest.toString('latin1') })
    }
    s.on('data', onData)
    s.once('error', reject)
  })
}

/** A decoded answer (dns-packet decodes the rcode; its types leave it out). */
export type Answer = dnsPacket.DecodedPacket & { rcode: string }

/** DNS queries over one stream to the proxy's resolver; each call sends one query and reads its answer. */
export async function dnsStream(proxyPort: number, token: string): Promise<{ query(name: string, type?: string, klass?: string): Promise<Answer>; close(): void }> {
  const { socket, status } = await egressConnect(proxyPort, 'resolver.corral.internal:53', token)
  if (!status.startsWith('HTTP/1.1 200')) throw new Error(`resolver refused: ${status}`)
  let buf = Buffer.alloc(0)
  const waiting: Array<(p: Answer) => void> = []
  socket.on('data', (c: Buffer) => {
    buf = Buffer.concat([buf, c])
    while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
      const msg = buf.subarray(2, 2 + buf.readUInt16BE(0))
      buf = buf.subarray(2 + msg.length)
      waiting.shift()?.(dnsPacket.decode(msg) as Answer)
    }
  })
  socket.resume()
  let id = 1
  return {
    query(name, type = 'A', klass = 'IN') {
      return new Promise((resolve) => {
        waiting.push(resolve)
        socket.write(dnsPacket.streamEncode({ type: 'query', id: id++, flags: dnsPacket.RECURSION_DESIRED, questions: [{ name, type: type as 'A', class: klass as 'IN' }] }))
      })
    },
    close: () => socket.destroy(),
  }
}
