// A `ws` client in a process of its own (so its memory is not the proxy's): a plain absolute-URI
// upgrade through the proxy, reporting over IPC the bytes its socket has read (every MiB), the
// message it got (size and sha256) and the close code. Used by test/proxy/websocket-stream.test.ts.
import { createHash } from 'node:crypto'
import { connect } from 'node:net'
import { WebSocket } from 'ws'

const [proxyPort, target, path, token] = process.argv.slice(2)
const ws = new WebSocket(`ws://${target}${path}`, {
  createConnection: () => connect(Number(proxyPort), '127.0.0.1'),
  headers: { 'proxy-authorization': `Bearer ${token}` },
  perMessageDeflate: false,
  finishRequest: (req) => {
    req.path = `http://${target}${path}`
    req.end()
  },
})
const MIB = 1024 * 1024
let read = 0
ws.on('open', () => {
  process.send({ type: 'open' })
  ws._socket.on('data', (b) => {
    const before = Math.floor(read / MIB)
    read += b.length
    if (Math.floor(read / MIB) > before) process.send({ type: 'bytes', n: read })
  })
  ws.send('go')
})
ws.on('message', (data) => {
  process.send({ type: 'message', size: data.length, sha256: createHash('sha256').update(data).digest('hex') })
  ws.close(1000)
})
ws.on('close', (code) => {
  process.send({ type: 'close', code })
  process.disconnect()
})
ws.on('error', (err) => {
  process.send({ type: 'error', message: err.message })
  process.disconnect()
})
