// The first process inside every workspace. It is plain JavaScript kept as text, written to the
// runtime's shared dir and run with the host's `node`: inside the sandbox there is no tsx, no
// node_modules of ours on a known path and no build step to rely on, and the same file must serve
// the sources (tests, `bin/dev.js`) and `dist/` alike.
//
// What it does:
// 1. When CORRAL_BRIDGE_SOCKET is set (the bubblewrap driver), listens on 127.0.0.1:CORRAL_BRIDGE_PORT
//    inside the sandbox's private network namespace and relays every connection to that unix socket,
//    which the host bridges to the policy proxy. This listener is what HTTPS_PROXY points at.
//    With CORRAL_EGRESS_FDS (transparent egress, egress.ts): takes the three sockets made for it
//    before the uid was dropped (the TPROXY listener, the resolver's UDP and TCP port 53) and hands
//    each intercepted connection to the proxy as a CONNECT to the address and port the tool
//    dialled (marked x-corral-egress), and each DNS query as a framed message on a CONNECT to
//    resolver.corral.internal:53. What the proxy refuses is closed. A fourth descriptor, a datagram
//    socket on which egress.ts's relay hands over each packet of the tun device non-DNS UDP is
//    routed into, is read packet by packet: each new destination and port is
//    reported to the proxy (a CONNECT marked `udp`, refused with its row there), at most once per
//    UDP_REPORT_MS each and for at most UDP_KEYS of them at a time; the datagrams go nowhere.
// 2. Spawns the agent command with the rest of the environment (plus CORRAL_PACK_ENV's), reports `spawned` on fd 3 and
//    mirrors the agent's exit status.
// 3. Stops the agent when stdin closes (the host's stop request) or on SIGTERM: SIGTERM first,
//    SIGKILL after CORRAL_STOP_GRACE_MS.
// The CONNECT, the relay and the DNS forwarding are proxy-connect-source.ts's, shared with the
// Kubernetes pod's egress container.
import { proxyConnectSource } from './proxy-connect-source.js'

export const SANDBOX_INIT_SOURCE = String.raw`import net from 'node:net'
import { spawn } from 'node:child_process'
import { writeSync, readSync } from 'node:fs'
import dgram from 'node:dgram'
import { constants } from 'node:os'

const argv = process.argv.slice(2)
const socketPath = process.env.CORRAL_BRIDGE_SOCKET
const port = Number(process.env.CORRAL_BRIDGE_PORT || 0)
const graceMs = Number(process.env.CORRAL_STOP_GRACE_MS || 5000)
// A pack's environment (JSON) is merged into the agent's only, beneath corral's variables: as
// real variables it would reach prlimit, which runs before the limits apply (LD_PRELOAD).
let packEnv = {}
try { packEnv = JSON.parse(process.env.CORRAL_PACK_ENV || '{}') } catch {}
const env = { ...packEnv, ...process.env }
delete env.CORRAL_BRIDGE_SOCKET
delete env.CORRAL_BRIDGE_PORT
delete env.CORRAL_STOP_GRACE_MS
delete env.CORRAL_PACK_ENV
const egressFds = (process.env.CORRAL_EGRESS_FDS || '').split(',').filter(Boolean).map(Number)
delete env.CORRAL_EGRESS_FDS
const token = process.env.CORRAL_PROXY_TOKEN || ''

function report(line) {
  try { writeSync(3, line + '\n') } catch {}
}
function fail(code, message) {
  process.stderr.write('corral-init: ' + message + '\n')
  report('failed ' + message)
  process.exit(code)
}
${proxyConnectSource('path: socketPath')}
function startEgress([tcpFd, udpFd, dnsFd]) {
  const intercept = net.createServer({ allowHalfOpen: true, pauseOnConnect: true }, (inner) => {
    inner.on('error', () => inner.destroy())
    handOver(inner, inner.localAddress + ':' + inner.localPort)
  })
  intercept.listen({ fd: tcpFd })
  const dnsTcp = net.createServer({ allowHalfOpen: true, pauseOnConnect: true }, resolveStream)
  dnsTcp.listen({ fd: dnsFd })
  const udp = dgram.createSocket('udp4')
  udp.on('error', () => {})
  udp.on('message', (msg, rinfo) => resolveDatagram(udp, msg, rinfo))
  udp.bind({ fd: udpFd })
}

const UDP_REPORT_MS = 10000
const UDP_KEYS = 256

const UDP_POLL_MS = 200

// Raw IPv4 packets from the tun device, one per read of the relay's socket: the destination and
// port of each UDP datagram. Anything else (IPv6 router solicitations, fragments after the first)
// is ignored. The descriptor is non-blocking and polled: node has no way to wait on a raw
// descriptor, and a blocking read in its thread pool would keep the process from ever exiting.
let udpDrain = () => Promise.resolve()
function startUdpReports(fd) {
  const reported = new Map()
  let inFlight = 0
  const packet = Buffer.alloc(65536)
  const report = (n) => {
    if (n < 20 || packet[0] >> 4 !== 4 || packet[9] !== 17) return
    const ihl = (packet[0] & 15) * 4
    if ((packet.readUInt16BE(6) & 0x1fff) !== 0 || n < ihl + 4) return
    const key = packet[16] + '.' + packet[17] + '.' + packet[18] + '.' + packet[19] + ':' + packet.readUInt16BE(ihl + 2)
    const now = Date.now()
    if (now - (reported.get(key) ?? -Infinity) < UDP_REPORT_MS) return
    reported.delete(key)
    if (reported.size >= UDP_KEYS) reported.delete(reported.keys().next().value)
    reported.set(key, now)
    inFlight++
    proxyConnect(key, 'udp', (outer) => {
      inFlight--
      if (outer) outer.destroy()
    })
  }
  const drain = () => {
    // At most a device queue's worth per tick; what the kernel queued past it was dropped there.
    for (let i = 0; i < 1000; i++) {
      let n
      try { n = readSync(fd, packet, 0, packet.length, null) } catch { return }
      if (n <= 0) return
      report(n)
    }
  }
  setInterval(drain, UDP_POLL_MS).unref()
  // What the agent sent just before it ended is still reported (for up to a second).
  udpDrain = () => {
    drain()
    return new Promise((resolve) => {
      const deadline = Date.now() + 1000
      const check = () => (inFlight === 0 || Date.now() > deadline ? resolve() : setTimeout(check, 20))
      check()
    })
  }
}

async function main() {
  if (argv.length === 0) fail(64, 'no agent command given')
  if (socketPath) {
    const server = net.createServer({ allowHalfOpen: true }, (inner) => {
      const outer = net.createConnection({ path: socketPath, allowHalfOpen: true })
      inner.setNoDelay(true) // no Nagle delay on replies to the agent (docs/runtime.md "Benchmark")
      relay(inner, outer)
    })
    await new Promise((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, '127.0.0.1', resolve)
    })
    if (egressFds.length >= 3) startEgress(egressFds)
    if (egressFds.length === 4) startUdpReports(egressFds[3])
  }
  const child = spawn(argv[0], argv.slice(1), { env, stdio: ['ignore', 'inherit', 'inherit'] })
  let stopping = false
  const stop = () => {
    if (stopping) return
    stopping = true
    child.kill('SIGTERM')
    setTimeout(() => child.kill('SIGKILL'), graceMs).unref()
  }
  child.once('error', (err) => fail(127, 'cannot start agent ' + argv[0] + ': ' + err.message))
  child.once('spawn', () => report('spawned ' + child.pid))
  child.once('exit', (code, signal) => {
    void udpDrain().then(() => process.exit(code ?? 128 + (signal ? constants.signals[signal] ?? 0 : 0)))
  })
  process.stdin.on('end', stop)
  process.stdin.on('error', stop)
  process.stdin.resume()
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
}

main().catch((err) => fail(70, err && err.message ? err.message : String(err)))
`
