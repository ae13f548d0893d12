// A raw HTTP/2 client for attack tests: frames written byte for byte (node:http2 and curl refuse
// to send what these tests send) inside a CONNECT tunnel over TLS with ALPN `h2`, and the frames
// that come back, until the proxy closes the connection or the test stops reading.
import type { Socket } from 'node:net'
import { connect as tlsConnect, type TLSSocket } from 'node:tls'
import { openTunnel } from '../helpers/raw-socket.js'

export const FRAME = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, GOAWAY: 7, CONTINUATION: 9 } as const
export const FLAG = { END_STREAM: 1, ACK: 1, END_HEADERS: 4 } as const
export const CODE = { NO_ERROR: 0, PROTOCOL_ERROR: 1, CANCEL: 8, ENHANCE_YOUR_CALM: 11 } as const

export interface Frame { type: number; flags: number; stream: number; payload: Buffer }

export function frame(type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9)
  head.writeUIntBE(payload.length, 0, 3)
  head[3] = type
  head[4] = flags
  head.writeUInt32BE(stream & 0x7fffffff, 5)
  return Buffer.concat([head, payload])
}

/** HPACK integer with an N-bit prefix (RFC 7541 §5.1). */
function int(value: number, prefixBits: number, firstByte: number): Buffer {
  const max = (1 << prefixBits) - 1
  if (value < max) return Buffer.from([firstByte | value])
  const out = [firstByte | max]
  let v = value - max
  while (v >= 128) {
    out.push((v % 128) + 128)
    v = Math.floor(v / 128)
  }
  out.push(v)
  return Buffer.from(out)
}

function str(s: string): Buffer {
  const b = Buffer.from(s, 'latin1')
  return Buffer.concat([int(b.length, 7, 0), b])
}

/** A literal header field without indexing, new name (the bytes as given: any case, any value). */
export function literal(name: string, value: string): Buffer {
  return Buffer.concat([Buffer.from([0x00]), str(name), str(value)])
}

/** A literal with incremental indexing: it enters the dynamic table (index 62 when first). */
export function indexedLiteral(name: string, value: string): Buffer {
  return Buffer.concat([Buffer.from([0x40]), str(name), str(value)])
}

/** A reference to a table entry (1 byte for indexes under 127). */
export function indexed(index: number): Buffer {
  return int(index, 7, 0x80)
}

/** The header block of a request (pseudo-headers first), plus extra fields already encoded. */
export function requestBlock(authority: string, path: string, method = 'GET', ...extra: Buffer[]): Buffer {
  return Buffer.concat([literal(':method', method), literal(':scheme', 'https'), literal(':path', path), literal(':authority', authority), ...extra])
}

export interface RawH2 {
  tls: TLSSocket
  frames: Frame[]
  closed: Promise<void>
  send(...bufs: Buffer[]): void
  /** Waits until a frame matches (or the connection closed); the matching frame or undefined. */
  until(pred: (f: Frame) => boolean, timeoutMs?: number): Promise<Frame | undefined>
}

/** Preface and an empty SETTINGS, over TLS (ALPN h2) inside a CONNECT tunnel. */
export async function rawH2(proxyPort: number, target: string, token: string, caPem: string): Promise<RawH2> {
  const { socket } = await openTunnel(proxyPort, target, token)
  const host = target.replace(/:\d+$/, '')
  const tls = await new Promise<TLSSocket>((resolve, reject) => {
    const t = tlsConnect({ socket: socket as Socket, host, ca: caPem, ALPNProtocols: ['h2'] }, () => resolve(t))
    t.once('error', reject)
  })
  if (tls.alpnProtocol !== 'h2') {
    tls.destroy()
    throw new Error(`the proxy did not negotiate h2 (ALPN: ${String(tls.alpnProtocol)})`)
  }
  const frames: Frame[] = []
  let buf = Buffer.alloc(0)
  let waiters: Array<() => void> = []
  const wake = (): void => {
    const w = waiters
    waiters = []
    for (const f of w) f()
  }
  tls.on('data', (c: Buffer) => {
    buf = Buffer.concat([buf, c])
    while (buf.length >= 9) {
      const len = buf.readUIntBE(0, 3)
      if (buf.length < 9 + len) break
      frames.push({ type: buf[3]!, flags: buf[4]!, stream: buf.readUInt32BE(5) & 0x7fffffff, payload: buf.subarray(9, 9 + len) })
      buf = buf.subarray(9 + len)
    }
    wake()
  })
  tls.on('error', () => {})
  const closed = new Promise<void>((r) => tls.once('close', () => {
    r()
    wake()
  }))
  const send = (...bufs: Buffer[]): void => {
    if (!tls.destroyed) tls.write(Buffer.concat(bufs))
  }
  send(Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'), frame(FRAME.SETTINGS, 0, 0))
  const until = async (pred: (f: Frame) => boolean, timeoutMs = 10_000): Promise<Frame | undefined> => {
    const end = Date.now() + timeoutMs
    for (;;) {
      const hit = frames.find(pred)
      if (hit || tls.destroyed || Date.now() > end) return hit
      await new Promise<void>((r) => {
        waiters.push(r)
        setTimeout(r, 50)
      })
    }
  }
  return { tls, frames, closed, send, until }
}

export const goaway = (f: Frame): boolean => f.type === FRAME.GOAWAY
export const codeOf = (f: Frame): number => (f.type === FRAME.GOAWAY ? f.payload.readUInt32BE(4) : f.payload.readUInt32BE(0))
