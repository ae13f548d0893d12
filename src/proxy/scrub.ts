// Credentials never come back (docs/security.md): the values the proxy injected into a request
// (credentials in every placement, secret values used by transforms) are masked in that request's
// response headers and body before the agent sees them, in every spelling scrub-forms.ts derives
// (as sent, JSON-escaped, percent-encoded, base64, base64url, hex). Each run of masked bytes
// becomes one fixed-width mask, so the agent learns neither a secret's bytes nor its length; the
// response loses its Content-Length (response-headers.ts). Every byte covered by any occurrence of
// any needle is masked (overlaps too). The body is scanned as it streams: after each chunk only
// the shortest tail that could still begin a needle is held back, so an SSE event is not delayed
// unless its last bytes look like the start of a secret.
import { Transform, type TransformCallback } from 'node:stream'
import { encodedForms } from './scrub-forms.js'

/** What one run of masked bytes becomes, whatever its length. */
export const MASK = '********'
const MASK_BYTES = Buffer.from(MASK)

/** One body's scan: what may be sent of each chunk now, and at the end what was held back. */
export interface BodyScan {
  push(chunk: Buffer): Buffer
  end(): Buffer | undefined
}

/** Base64 and base64url characters: what an edge of a base64 spelling may be (scrub-forms.ts). */
const BASE64_CHAR = new Uint8Array(256)
for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_') BASE64_CHAR[c.charCodeAt(0)] = 1
const PAD = 0x3d // "="

/** The needles of one set of injected values, built once and shared by every response that set is scanned in. */
class Needles {
  readonly buffers: Buffer[] = []
  readonly strings: string[] = []
  /** `strings` lower-cased: a header name holding one is dropped whatever its case. */
  readonly lower: string[] = []
  /** Per needle: its base64 edges (scrub-forms.ts `Spelling`), 0 or 1 each. */
  readonly before: number[] = []
  readonly after: number[] = []
  /** Some needle has an edge before it: the last byte of a chunk may be that edge. */
  anyBefore = false

  constructor(values: Iterable<string>) {
    // Each distinct non-empty spelling once, in order.
    const seenValues = new Set<string>()
    const seen = new Set<string>()
    for (const v of values) {
      if (v.length === 0 || seenValues.has(v)) continue
      seenValues.add(v)
      for (const { text, edges } of encodedForms(v)) {
        if (seen.has(text)) continue
        seen.add(text)
        const b = Buffer.from(text, 'utf8')
        this.buffers.push(b)
        // Header values arrive as latin1 strings (one char per byte): compare in that form. A
        // spelling whose UTF-8 is as long as it is ASCII only, and its latin1 form is itself.
        const str = b.length === text.length ? text : b.toString('latin1')
        this.strings.push(str)
        this.lower.push(str.toLowerCase())
        this.before.push(edges?.before ? 1 : 0)
        this.after.push(edges?.after ? 1 : 0)
        if (edges?.before) this.anyBefore = true
      }
    }
  }
}

// The same credentials are injected request after request: their needles are built once (a
// bounded cache, like scrub-forms.ts's, in the process that already holds the values).
const NEEDLES_MAX = 1024
const needlesCache = new Map<string, Needles>()

function needlesFor(values: readonly string[]): Needles {
  const key = values.length === 1 ? values[0]! : values.join('\0')
  let n = needlesCache.get(key)
  if (!n) {
    n = new Needles(values)
    if (needlesCache.size >= NEEDLES_MAX) needlesCache.clear()
    needlesCache.set(key, n)
  }
  return n
}

export class Scrubber {
  readonly #needles: Buffer[]
  readonly #strings: string[]
  readonly #lower: string[]
  readonly #before: number[]
  readonly #after: number[]
  readonly #anyBefore: boolean
  count = 0

  constructor(values: readonly string[]) {
    const n = needlesFor(values)
    this.#needles = n.buffers
    this.#strings = n.strings
    this.#lower = n.lower
    this.#before = n.before
    this.#after = n.after
    this.#anyBefore = n.anyBefore
  }

  /** A header value with every needle masked. */
  maskString(s: string): string {
    let found = false
    for (const n of this.#strings) {
      if (s.includes(n)) {
        found = true
        break
      }
    }
    if (!found) return s
    const raw = Buffer.from(s, 'latin1')
    const flags = this.#flags(raw, Infinity, undefined)
    return flags ? collapse(raw, flags, raw.length, false).out.toString('latin1') : s
  }

  /** True when a header name holds a needle (the header is dropped: names cannot be masked). */
  inName(name: string): boolean {
    for (let k = 0; k < this.#strings.length; k++) if (name.includes(this.#lower[k]!) || name.includes(this.#strings[k]!)) return true
    return false
  }

  /**
   * Length of the tail of `buf` to hold back: the longest suffix that is a proper prefix of some
   * needle. For a base64 spelling with edges, also a whole occurrence too close to the end to see
   * the characters after it, and one more byte before, the edge it may need; and, when any needle
   * has an edge before it, a last byte that is a base64 character (the next chunk may begin one).
   */
  holdback(buf: Buffer): number {
    let keep = this.#anyBefore && buf.length > 0 && BASE64_CHAR[buf[buf.length - 1]!] ? 1 : 0
    for (let k = 0; k < this.#needles.length; k++) {
      const n = this.#needles[k]!
      const first = n[0]!
      // With an edge after it, an occurrence ending in the last 3 bytes (edge, "=", "=") is held.
      const from = Math.max(0, buf.length - n.length + 1 - 3 * this.#after[k]!)
      for (let i = buf.indexOf(first, from); i >= 0 && i < buf.length; i = buf.indexOf(first, i + 1)) {
        const len = buf.length - i
        const hold = i > 0 ? len + this.#before[k]! : len
        if (hold <= keep) break
        if (buf.compare(n, 0, Math.min(len, n.length), i, i + Math.min(len, n.length)) === 0 && (len <= n.length || edgeSoFar(buf, i + n.length))) {
          keep = hold
          break
        }
      }
    }
    return keep
  }

  /** A small buffer (a control frame's payload) with every needle masked. */
  whole(data: Buffer): Buffer {
    const scan = this.scan()
    const head = scan.push(data)
    const tail = scan.end()
    return tail && tail.length ? Buffer.concat([head, tail]) : head
  }

  /** A streaming transform of a body: masks across chunk boundaries (a decoded body's scan). */
  stream(): Transform {
    const scan = this.scan()
    return new Transform({
      transform: (chunk: Buffer, _enc, cb: TransformCallback) => cb(null, scan.push(chunk)),
      flush: (cb: TransformCallback) => cb(null, scan.end()),
    })
  }

  /**
   * The scan of one body, chunk by chunk, without a stream: `push` returns what may be sent now,
   * `end` what was held back (the relay calls them inline: a Transform and its pipe per response
   * cost about a tenth of the proxy's time per request, bench/proxy.ts).
   */
  scan(): BodyScan {
    // The held-back tail is kept raw (so a needle that begins in it is still found whole next
    // time), with the positions an earlier occurrence already covered.
    // `masking`: the last byte sent was masked, so a run that goes on past it adds no second mask.
    let carry: Buffer | undefined
    let carryFlags: Uint8Array | undefined
    let masking = false
    const emit = (raw: Buffer, flags: Uint8Array | undefined, end: number): Buffer => {
      if (end === 0) return raw.subarray(0, 0)
      if (!flags) {
        masking = false
        return end === raw.length ? raw : raw.subarray(0, end)
      }
      const c = collapse(raw, flags, end, masking)
      masking = c.masking
      return c.out
    }
    return {
      push: (chunk: Buffer): Buffer => {
        const raw = carry ? Buffer.concat([carry, chunk]) : chunk
        let pre: Uint8Array | undefined
        if (carryFlags) {
          pre = new Uint8Array(raw.length)
          pre.set(carryFlags)
        }
        const keep = this.holdback(raw)
        const cut = raw.length - keep
        const flags = this.#flags(raw, cut, pre)
        carry = keep > 0 ? raw.subarray(cut) : undefined
        carryFlags = keep > 0 && flags ? flags.slice(cut) : undefined
        return emit(raw, flags, cut)
      },
      end: (): Buffer | undefined => {
        if (!carry) return undefined
        const tail = emit(carry, this.#flags(carry, carry.length, carryFlags), carry.length)
        carry = carryFlags = undefined
        return tail
      },
    }
  }

  /**
   * Marks the union of every occurrence of every needle in `raw` (overlaps included: masking one
   * needle first must not hide a longer one that overlaps it); undefined when nothing is marked.
   * Only occurrences starting before `countBefore` are counted (the others lie in the held-back
   * tail and are found again with the next chunk). `pre` marks positions an earlier round covered.
   */
  #flags(raw: Buffer, countBefore: number, pre: Uint8Array | undefined): Uint8Array | undefined {
    let flags: Uint8Array | undefined = pre
    for (let k = 0; k < this.#needles.length; k++) {
      const n = this.#needles[k]!
      for (let i = raw.indexOf(n); i >= 0; i = raw.indexOf(n, i + 1)) {
        flags ??= new Uint8Array(raw.length)
        let start = i
        let end = i + n.length
        // A base64 spelling's edge characters hold some of the value's bits: masked with it.
        if (this.#before[k] && i > 0 && BASE64_CHAR[raw[i - 1]!]) start--
        if (this.#after[k] && end < raw.length && BASE64_CHAR[raw[end]!]) {
          end++
          for (let pads = 0; pads < 2 && end < raw.length && raw[end] === PAD; pads++) end++
        }
        flags.fill(1, start, end)
        if (i < countBefore) this.count++
      }
    }
    return flags
  }

  /** Whether any needle occurs in the names or values of `h` (lower-cased in the names too, as inName()). */
  #anyIn(h: Record<string, string | string[]>): boolean {
    let all = ''
    for (const k in h) {
      const v = h[k]!
      all += `${k}\n${typeof v === 'string' ? v : v.join('\n')}\n`
    }
    for (let k = 0; k < this.#strings.length; k++) if (all.includes(this.#strings[k]!) || all.includes(this.#lower[k]!)) return true
    return false
  }

  /** Response headers with needles masked in values; headers whose name holds one are dropped. */
  headers(h: Record<string, string | string[]>): Record<string, string | string[]> {
    // Almost every response echoes nothing: one search per needle over all the names and values
    // together says so (a needle found across two of them only sends this to the exact pass).
    if (!this.#anyIn(h)) return h
    const out: Record<string, string | string[]> = {}
    for (const k in h) {
      const v = h[k]!
      if (this.inName(k)) {
        this.count++
        continue
      }
      out[k] = Array.isArray(v) ? v.map((x) => this.maskString(x)) : this.maskString(v)
    }
    return out
  }
}

/**
 * `raw[0, end)` with each run of marked bytes replaced by one MASK; `continuing` says the byte
 * before `raw` was masked (a run that goes on adds nothing). Returns whether the last byte was.
 */
function collapse(raw: Buffer, flags: Uint8Array, end: number, continuing: boolean): { out: Buffer; masking: boolean } {
  const parts: Buffer[] = []
  let masking = continuing
  for (let i = 0; i < end; ) {
    const start = flags.indexOf(1, i)
    if (start < 0 || start >= end) {
      parts.push(raw.subarray(i, end))
      masking = false
      break
    }
    if (start > i) {
      parts.push(raw.subarray(i, start))
      masking = false
    }
    let stop = flags.indexOf(0, start)
    if (stop < 0 || stop > end) stop = end
    if (!masking) parts.push(MASK_BYTES)
    masking = true
    i = stop
  }
  return { out: parts.length === 1 ? parts[0]! : Buffer.concat(parts), masking }
}

/** Whether `buf` from `at` to its end can still be a base64 spelling's edge: a base64 character, then "=" (up to two). */
function edgeSoFar(buf: Buffer, at: number): boolean {
  if (!BASE64_CHAR[buf[at]!]) return false
  for (let j = at + 1; j < buf.length; j++) if (buf[j] !== PAD) return false
  return true
}
