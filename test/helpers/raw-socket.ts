// Raw loopback sockets for attack tests: write exact bytes (or bytes inside a CONNECT tunnel) and
// collect what comes back until the peer closes, bounded by a timeout.
import { connect, type Socket } from 'node:net'
import { connect as tlsConnect, type TLSSocket } from 'node:tls'

export interface RawResult {
  /** Everything the peer sent, as latin1 text. */
  text: string
  /** The first line (status line of an HTTP answer), '' when nothing came back. */
  status: string
  /** True when the peer closed (or reset) before the timeout. */
  closed: boolean
}

/** Sends `chunks` (strings or buffers; a number is a pause in ms; null half-closes) and reads until close or `timeoutMs`. */
export function rawExchange(port: number, chunks: Array<string | Buffer | number | null>, timeoutMs = 5_000): Promise<RawResult> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1')
    collect(s, timeoutMs, resolve)
    s.once('connect', () => void writeAll(s, chunks))
  })
}

/** Opens a CONNECT tunnel (with an optional token) and resolves with the socket once the proxy answered 200. */
export function openTunnel(port: number, target: string, token?: string): Promise<{ socket: Socket; head: string }> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => {
      s.write(`CONNECT ${target} HTTP/1.1\r\nhost: ${target}\r\n${token ? `proxy-authorization: Bearer ${token}\r\n` : ''}\r\n`)
    })
    let buf = ''
    const onData = (c: Buffer): void => {
      buf += c.toString('latin1')
      const end = buf.indexOf('\r\n\r\n')
      if (end < 0) return
      s.off('data', onData)
      if (!buf.startsWith('HTTP/1.1 200')) {
        s.destroy()
        reject(new Error(`CONNECT refused: ${buf.split('\r\n')[0]}`))
      } else resolve({ socket: s, head: buf.slice(0, end) })
    }
    s.on('data', onData)
    s.once('error', reject)
  })
}

/** TLS over an open tunnel socket, trusting `caPem`; resolves once the handshake is done. */
export function tlsOver(socket: Socket, servername: string, caPem: string): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const t = tlsConnect({ socket, servername, ca: caPem, ALPNProtocols: ['http/1.1'] }, () => resolve(t))
    t.once('error', reject)
  })
}

/** Writes chunks to an already open stream and reads until close or timeout. */
export function exchangeOn(s: Socket, chunks: Array<string | Buffer | number | null>, timeoutMs = 5_000): Promise<RawResult> {
  return new Promise((resolve) => {
    collect(s, timeoutMs, resolve)
    void writeAll(s, chunks)
  })
}

function collect(s: Socket, timeoutMs: number, resolve: (r: RawResult) => void): void {
  let text = ''
  let done = false
  const finish = (closed: boolean): void => {
    if (done) return
    done = true
    clearTimeout(timer)
    s.destroy()
    resolve({ text, status: text.split('\r\n')[0] ?? '', closed })
  }
  const timer = setTimeout(() => finish(false), timeoutMs)
  s.on('data', (c: Buffer) => (text += c.toString('latin1')))
  s.on('error', () => finish(true))
  s.on('close', () => finish(true))
}

async function writeAll(s: Socket, chunks: Array<string | Buffer | number | null>): Promise<void> {
  for (const c of chunks) {
    if (s.destroyed) return
    if (c === null) s.end()
    else if (typeof c === 'number') await new Promise((r) => setTimeout(r, c))
    else s.write(c)
  }
}
