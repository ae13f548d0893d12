// RFC 6455 framing for a relay that streams: the parser hands on each data frame's payload as it
// arrives (a frame's bytes are never gathered, nor a message's fragments), unmasked, with the
// frame's place in its message; control frames (at most 125 bytes) whole, in the order they came,
// also between the fragments of a message. `ws` and undici only hand out whole messages, which a
// streaming relay cannot wait for, so the codec is this file. Every rule `ws` enforces on a leg is
// enforced here, with its error names (they reach the row as `detail.websocket.error`): reserved
// bits (no extension is ever negotiated), opcodes and their order, control-frame size and FIN,
// masking by role, the message size limit (checked on each frame's header, before a byte of the
// frame is handed on) and UTF-8 of text messages (checked as they stream, with a fatal decoder).
import { isUtf8 } from 'node:buffer'
import { randomFillSync } from 'node:crypto'

export const OP_CONTINUATION = 0x0
export const OP_TEXT = 0x1
export const OP_BINARY = 0x2
export const OP_CLOSE = 0x8
export const OP_PING = 0x9
export const OP_PONG = 0xa

/** What the parser hands on, in wire order. */
export interface FrameHandler {
  /** A new message begins (its first frame's header was read). */
  start(text: boolean): void
  /** Payload of the current message, unmasked; `end` on the last bytes of its FIN frame. */
  data(chunk: Buffer, end: boolean): void
  /** A whole control frame (close, ping, pong), unmasked. */
  control(opcode: number, payload: Buffer): void
  /** A violation: the leg is closed with `close` (1002, 1007, 1009); nothing more is parsed. */
  error(code: string, close: number): void
}

/** The proxy's role on a leg: a server reads masked frames (the agent's), a client unmasked ones (the upstream's). */
export type Role = 'server' | 'client'

const MAX_HEADER = 14

export class FrameParser {
  readonly #role: Role
  readonly #maxMessage: number
  readonly #on: FrameHandler
  readonly #head = Buffer.alloc(MAX_HEADER)
  #headLen = 0
  /** Payload bytes of the current frame still to come; -1 while a header is being read. */
  #left = -1
  #opcode = 0
  #fin = false
  #mask: Buffer | undefined
  #maskAt = 0
  #control: Buffer[] = []
  #inMessage = false
  #messageBytes = 0
  /** One decoder for the leg's text messages: each message ends with a flush, which resets it. */
  readonly #decoder = new TextDecoder('utf-8', { fatal: true })
  /** The current message is text (its UTF-8 is checked as it streams). */
  #utf8 = false
  /** The decoder holds a text message begun in an earlier piece. */
  #partial = false
  #failed = false
  /** Data frames read (a message's fragments each count; control frames do not). */
  frames = 0

  constructor(role: Role, maxMessage: number, on: FrameHandler) {
    this.#role = role
    this.#maxMessage = maxMessage
    this.#on = on
  }

  /** Parses what the socket read; hands on everything it completes. */
  push(buf: Buffer): void {
    let at = 0
    while (at < buf.length && !this.#failed) {
      if (this.#left < 0) {
        at = this.#readHeader(buf, at)
        continue
      }
      const n = Math.min(this.#left, buf.length - at)
      const part = buf.subarray(at, at + n)
      at += n
      this.#left -= n
      this.#payload(part)
    }
  }

  /** Copies header bytes until the header is whole; returns where the payload begins. */
  #readHeader(buf: Buffer, at: number): number {
    while (at < buf.length) {
      this.#head[this.#headLen++] = buf[at++]!
      const need = headerLength(this.#head, this.#headLen)
      if (need !== undefined && this.#headLen === need) {
        this.#headLen = 0
        this.#onHeader(need)
        return at
      }
    }
    return at
  }

  #onHeader(size: number): void {
    const h = this.#head
    const b0 = h[0]!
    const b1 = h[1]!
    this.#fin = (b0 & 0x80) !== 0
    this.#opcode = b0 & 0x0f
    const masked = (b1 & 0x80) !== 0
    const len7 = b1 & 0x7f
    let len = len7
    if (len7 === 126) len = h.readUInt16BE(2)
    else if (len7 === 127) {
      const high = h.readUInt32BE(2)
      // Beyond 2^53 - 1 a length is not an exact number here (as `ws` refuses it).
      if (high > 0x1fffff) return this.#fail('WS_ERR_UNSUPPORTED_DATA_PAYLOAD_LENGTH', 1009)
      len = high * 2 ** 32 + h.readUInt32BE(6)
    }
    if (b0 & 0x40) return this.#fail('WS_ERR_UNEXPECTED_RSV_1', 1002)
    if (b0 & 0x30) return this.#fail('WS_ERR_UNEXPECTED_RSV_2_3', 1002)
    if (this.#role === 'server' && !masked) return this.#fail('WS_ERR_EXPECTED_MASK', 1002)
    if (this.#role === 'client' && masked) return this.#fail('WS_ERR_UNEXPECTED_MASK', 1002)
    this.#mask = masked ? Buffer.from(h.subarray(size - 4, size)) : undefined
    this.#maskAt = 0
    const op = this.#opcode
    if (op >= 0x8) {
      if (op > OP_PONG) return this.#fail('WS_ERR_INVALID_OPCODE', 1002)
      if (!this.#fin) return this.#fail('WS_ERR_EXPECTED_FIN', 1002)
      if (len > 125 || (op === OP_CLOSE && len === 1)) return this.#fail('WS_ERR_INVALID_CONTROL_PAYLOAD_LENGTH', 1002)
      this.#left = len
      this.#control = []
      if (len === 0) this.#controlDone()
      return
    }
    if (op === OP_CONTINUATION ? !this.#inMessage : op > OP_BINARY || this.#inMessage) return this.#fail('WS_ERR_INVALID_OPCODE', 1002)
    if (this.#messageBytes + len > this.#maxMessage) return this.#fail('WS_ERR_UNSUPPORTED_MESSAGE_LENGTH', 1009)
    this.#messageBytes += len
    this.#left = len
    this.frames++
    if (op !== OP_CONTINUATION) {
      this.#inMessage = true
      this.#utf8 = op === OP_TEXT
      this.#on.start(op === OP_TEXT)
    }
    if (len === 0) this.#dataPart(Buffer.alloc(0))
  }

  #payload(part: Buffer): void {
    if (this.#mask) {
      unmask(part, this.#mask, this.#maskAt)
      this.#maskAt = (this.#maskAt + part.length) & 3
    }
    if (this.#opcode >= 0x8) {
      this.#control.push(part)
      if (this.#left === 0) this.#controlDone()
      return
    }
    this.#dataPart(part)
  }

  #controlDone(): void {
    const payload = this.#control.length === 1 ? Buffer.from(this.#control[0]!) : Buffer.concat(this.#control)
    this.#control = []
    this.#left = -1
    if (this.#opcode === OP_CLOSE && payload.length >= 2) {
      const code = payload.readUInt16BE(0)
      if (!validCloseCode(code)) return this.#fail('WS_ERR_INVALID_CLOSE_CODE', 1002)
      if (!isUtf8(payload.subarray(2))) return this.#fail('WS_ERR_INVALID_UTF8', 1007)
    }
    this.#on.control(this.#opcode, payload)
  }

  #dataPart(part: Buffer): void {
    const end = this.#fin && this.#left === 0
    if (this.#utf8) {
      // A message read in one piece is checked in one native call; one that streams, by the decoder.
      if (end && !this.#partial ? !isUtf8(part) : !decodes(this.#decoder, part, end)) return this.#fail('WS_ERR_INVALID_UTF8', 1007)
      this.#partial = !end
    }
    if (this.#left === 0) this.#left = -1
    if (end) {
      this.#inMessage = false
      this.#messageBytes = 0
      this.#utf8 = false
    }
    if (part.length > 0 || end) this.#on.data(part, end)
  }

  #fail(code: string, close: number): void {
    this.#failed = true
    this.#on.error(code, close)
  }
}

/** The whole header's length once its first bytes are known (undefined until then). */
function headerLength(h: Buffer, have: number): number | undefined {
  if (have < 2) return undefined
  const len7 = h[1]! & 0x7f
  const mask = h[1]! & 0x80 ? 4 : 0
  return 2 + (len7 === 126 ? 2 : len7 === 127 ? 8 : 0) + mask
}

/** One frame as bytes: a client's frames are masked (a fresh key each), a server's are not. */
export function encodeFrame(opcode: number, fin: boolean, payload: Buffer, role: Role): Buffer {
  const masked = role === 'client'
  const len = payload.length
  const ext = len < 126 ? 0 : len < 0x10000 ? 2 : 8
  const head = 2 + ext + (masked ? 4 : 0)
  const out = Buffer.allocUnsafe(head + len)
  out[0] = (fin ? 0x80 : 0) | opcode
  out[1] = (masked ? 0x80 : 0) | (ext === 0 ? len : ext === 2 ? 126 : 127)
  if (ext === 2) out.writeUInt16BE(len, 2)
  else if (ext === 8) {
    out.writeUInt32BE(Math.floor(len / 2 ** 32), 2)
    out.writeUInt32BE(len >>> 0, 6)
  }
  payload.copy(out, head)
  if (masked) {
    const key = out.subarray(head - 4, head)
    maskKey(key)
    unmask(out.subarray(head), key, 0)
  }
  return out
}

/** Random bytes for masking keys, drawn 4 at a time and refilled when spent (as `ws` does). */
const POOL = Buffer.alloc(8192)
let poolAt = POOL.length

function maskKey(into: Buffer): void {
  if (poolAt + 4 > POOL.length) {
    randomFillSync(POOL)
    poolAt = 0
  }
  POOL.copy(into, 0, poolAt, poolAt + 4)
  poolAt += 4
}

/**
 * A close frame's payload: the code and a reason, cut to fit 125 bytes on a character boundary (a
 * cut character would make the peer fail the close, 1007); no code (1005 to the reader) is empty.
 */
export function closePayload(code: number | undefined, reason: string | Buffer): Buffer {
  if (code === undefined) return Buffer.alloc(0)
  let r = Buffer.from(reason)
  if (r.length > 123) {
    let end = 123
    while (end > 0 && (r[end]! & 0xc0) === 0x80) end--
    r = r.subarray(0, end)
  }
  const out = Buffer.allocUnsafe(2 + r.length)
  out.writeUInt16BE(code, 0)
  r.copy(out, 2)
  return out
}

/** XOR with the 4-byte key from key offset `at` (in place; masking and unmasking are the same). */
function unmask(buf: Buffer, key: Buffer, at: number): void {
  for (let i = 0; i < buf.length; i++) buf[i]! ^= key[(at + i) & 3]!
}

/** Codes a peer may send (RFC 6455 7.4.1; 1004-1006 and 1015 are never on the wire). */
export function validCloseCode(code: number): boolean {
  return (code >= 1000 && code <= 1014 && code !== 1004 && code !== 1005 && code !== 1006) || (code >= 3000 && code <= 4999)
}

/** Feeds a streaming fatal decoder; false on invalid UTF-8 (or, at the end, a cut character). */
function decodes(decoder: InstanceType<typeof TextDecoder>, part: Buffer, end: boolean): boolean {
  try {
    decoder.decode(part, { stream: !end })
    return true
  } catch {
    return false
  }
}
