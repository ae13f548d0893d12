// The first process inside every workspace. It is plain JavaScript kept as text, written to the
// runtime's shared dir and run with the host's `node`: inside the sandbox there is no tsx, no
// node_modules of ours on a known path and no build step to rely on, and the same file must serve
// the sources (tests, `bin/dev.js`) and `dist/` alike.
//
// What it does:
// 1. When CORRAL_BRIDGE_SOCKET is set (the bubblewrap driver), listens on 127.0.0.1:CORRAL_BRIDGE_PORT
//    inside the sandbox's private network namespace and relays every connection to that unix socket,
//    which the host bridges to the policy proxy. This listener is what HTTPS_PROXY points at.
// 2. Spawns the agent command with the rest of the environment (plus CORRAL_PACK_ENV's), reports `spawned` on fd 3 and
//    mirrors the agent's exit status.
// 3. Stops the agent when stdin closes (the host's stop request) or on SIGTERM: SIGTERM first,
//    SIGKILL after CORRAL_STOP_GRACE_MS.
// The relay mirrors src/runtime/relay.ts (half-close aware, back-pressure through pipe).

export const SANDBOX_INIT_SOURCE = String.raw`import net from 'node:net'
import { spawn } from 'node:child_process'
import { writeSync } from 'node:fs'
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

function report(line) {
  try { writeSync(3, line + '\n') } catch {}
}
function fail(code, message) {
  process.stderr.write('corral-init: ' + message + '\n')
  report('failed ' + message)
  process.exit(code)
}
function join(self, peer) {
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
    process.exit(code ?? 128 + (signal ? constants.signals[signal] ?? 0 : 0))
  })
  process.stdin.on('end', stop)
  process.stdin.on('error', stop)
  process.stdin.resume()
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
}

main().catch((err) => fail(70, err && err.message ? err.message : String(err)))
`
