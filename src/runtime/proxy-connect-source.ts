// How a workspace's own scripts hand connections to the proxy: the bubblewrap init
// (sandbox-init.ts) and the Kubernetes pod's `egress` container (kubernetes/egress.ts) run the
// same plain JavaScript, kept as text, and differ only in how they reach the proxy (the bridge's
// unix socket, the proxy Service over TCP). The text expects `net` (node:net) imported and `token`
// (the workspace's proxy token) defined before it.
//
// What it defines:
// - join, relay: splice two sockets both ways, as src/runtime/relay.ts does (half-close aware,
//   back-pressure through pipe);
// - proxyConnect(target, mark, cb): a CONNECT carrying the token (and x-corral-egress when
//   marked); calls back with the socket, paused, and the bytes after the answer's head unshifted,
//   once the proxy answered 200, or with null;
// - handOver(inner, target): an intercepted connection (accepted paused) to the proxy as a
//   CONNECT marked transparent to the address the tool dialled, closed if the proxy refuses;
// - resolveStream(inner), resolveDatagram(udp, msg, rinfo): a DNS query over TCP or UDP port 53 to
//   corral's resolver as framed messages on a CONNECT to resolver.corral.internal:53.

const SPLICE = String.raw`function join(self, peer) {
  self.on('error', () => peer.destroy())
  self.on('close', (hadError) => {
    if (hadError || !self.readableEnded || !self.writableFinished) peer.destroy()
  })
}
function relay(a, b) {
  join(a, b)
  join(b, a)
  a.pipe(b)
  b.pipe(a)
}
`

const FORWARDING = String.raw`function handOver(inner, target) {
  proxyConnect(target, 'transparent', (outer) => {
    if (!outer) { inner.destroy(); return }
    inner.setNoDelay(true)
    relay(inner, outer)
    inner.resume()
    outer.resume()
  })
}

function resolveStream(inner) {
  inner.on('error', () => inner.destroy())
  proxyConnect('resolver.corral.internal:53', '', (outer) => {
    if (!outer) { inner.destroy(); return }
    relay(inner, outer)
    inner.resume()
    outer.resume()
  })
}

function resolveDatagram(udp, msg, rinfo) {
  if (msg.length < 12 || msg.length > 4096) return
  proxyConnect('resolver.corral.internal:53', '', (outer) => {
    if (!outer) return
    let buf = Buffer.alloc(0)
    const timer = setTimeout(() => outer.destroy(), 5000)
    outer.on('error', () => outer.destroy())
    outer.on('close', () => clearTimeout(timer))
    outer.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk])
      if (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        udp.send(buf.subarray(2, 2 + buf.readUInt16BE(0)), rinfo.port, rinfo.address)
        outer.destroy()
      }
    })
    const len = Buffer.alloc(2)
    len.writeUInt16BE(msg.length)
    outer.write(Buffer.concat([len, msg]))
    outer.resume()
  })
}
`

/**
 * The snippet, with `dialOptions` (the address fields of `net.createConnection`'s options, as
 * JavaScript text, e.g. `path: socketPath`) saying how to reach the proxy.
 */
export function proxyConnectSource(dialOptions: string): string {
  return SPLICE + '\n' + String.raw`function proxyConnect(target, mark, cb) {
  const outer = net.createConnection({ ${dialOptions}, allowHalfOpen: true })
  let head = Buffer.alloc(0)
  let done = false
  const finish = (ok) => {
    if (done) return
    done = true
    outer.off('data', onData)
    if (!ok) { outer.destroy(); cb(null); return }
    const rest = head.subarray(head.indexOf('\r\n\r\n') + 4)
    outer.pause()
    if (rest.length) outer.unshift(rest)
    cb(outer)
  }
  const onData = (chunk) => {
    head = Buffer.concat([head, chunk])
    const end = head.indexOf('\r\n\r\n')
    if (end >= 0) finish(head.subarray(0, 12).toString('latin1') === 'HTTP/1.1 200')
    else if (head.length > 16384) finish(false)
  }
  outer.on('data', onData)
  outer.once('error', () => finish(false))
  outer.once('close', () => finish(false))
  outer.write('CONNECT ' + target + ' HTTP/1.1\r\nhost: ' + target + '\r\nproxy-authorization: Bearer ' + token + '\r\n' + (mark ? 'x-corral-egress: ' + mark + '\r\n' : '') + '\r\n')
}
` + '\n' + FORWARDING
}
