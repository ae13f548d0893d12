// The HTTP/2 attack classes against the proxy's intercepted h2 leg, as raw frames: rapid reset
// (CVE-2023-44487), CONTINUATION floods, HPACK bombs, SETTINGS floods, h2-to-HTTP/1.1 downgrade
// smuggling (a body past content-length, connection-specific headers, uppercase names, CR/LF in
// values), and extended CONNECT. Each is bounded: the stream or the session is refused, nothing
// reaches the upstream, and the proxy keeps serving other clients.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { onLoopback } from '../helpers/loopback-caps.js'
import { rawExchange } from '../helpers/raw-socket.js'
import { startHarness, type Harness } from '../proxy/harness.js'
import { h2Request, h2Through } from '../proxy/h2-harness.js'
import { CODE, FLAG, FRAME, codeOf, frame, goaway, indexed, indexedLiteral, literal, rawH2, requestBlock } from './h2-raw.js'

const CAPS = `
- name: api
  type: http
  allow:
    - domains: ["127.0.0.1"]
      methods: [GET, POST]
`

describe('HTTP/2 attack classes', () => {
  let h: Harness
  let token = ''
  let port = 0
  const seen: string[] = []
  const target = (): string => `127.0.0.1:${h.up.httpsPort}`
  const raw = () => rawH2(port, target(), token, h.proxy.ca.certPem)
  /** The proxy still serves a well-formed h2 client after the attack. */
  const stillServes = async (): Promise<void> => {
    const s = await h2Through(h, target(), token)
    try {
      // Streams of a cut session free their workspace slots as their requests settle.
      let status = 0
      for (let i = 0; i < 100 && status !== 200; i++) {
        status = (await h2Request(s, { ':path': '/after' })).status
        if (status === 429) await new Promise((r) => setTimeout(r, 50))
      }
      expect(status).toBe(200)
    } finally {
      s.close()
    }
  }

  beforeAll(async () => {
    h = await startHarness({ limits: { maxHeaderBytes: 16 * 1024, transportRowsPerSecond: 1_000 } })
    port = Number(new URL(h.proxyUrl).port)
    token = (await h.workspace(onLoopback(CAPS, h.up.httpsPort), 'idle', { raw: true })).token
    h.up.handler.current = (req, res) => {
      seen.push(`${req.method} ${req.url} ${JSON.stringify(req.headers)}`)
      let body = ''
      req.on('data', (c: Buffer) => (body += c.toString('latin1')))
      req.on('end', () => {
        if (body) seen.push(`body ${body}`)
        res.end('ok')
      })
    }
  })
  afterAll(async () => h?.close())

  it('rapid reset: streams opened and reset at once get GOAWAY ENHANCE_YOUR_CALM, one row, and few reach the upstream', async () => {
    const c = await raw()
    const before = seen.length
    const burst: Buffer[] = []
    for (let i = 0; i < 1_000; i++) {
      const id = 1 + 2 * i
      burst.push(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, id, requestBlock(target(), `/rr/${i}`)))
      burst.push(frame(FRAME.RST_STREAM, 0, id, Buffer.from([0, 0, 0, CODE.CANCEL])))
    }
    c.send(...burst)
    const g = await c.until(goaway)
    expect(g && codeOf(g)).toBe(CODE.ENHANCE_YOUR_CALM)
    await c.closed
    const rows = await h.audit.waitForDecisions(1)
    expect(rows.some((r) => r.reason === 'limit_exceeded' && (r.detail as Record<string, unknown>)?.limit === 'h2_stream_resets')).toBe(true)
    // Far fewer than the thousand streams sent ever became upstream requests.
    expect(seen.length - before).toBeLessThan(500)
    await stillServes()
  })

  it('CONTINUATION flood: a header block that never ends is cut (the session closes), nothing reaches the upstream', async () => {
    const c = await raw()
    const before = seen.length
    c.send(frame(FRAME.HEADERS, 0, 1, requestBlock(target(), '/continuation')))
    const filler = literal('x-fill', 'a'.repeat(200))
    for (let i = 0; i < 2_000 && !c.tls.destroyed; i++) {
      c.send(frame(FRAME.CONTINUATION, 0, 1, filler))
      if (i % 100 === 0) await new Promise((r) => setImmediate(r))
    }
    const cut = await c.until((f) => f.type === FRAME.GOAWAY || f.type === FRAME.RST_STREAM)
    expect(cut).toBeDefined()
    expect(seen.slice(before).filter((s) => s.includes('/continuation'))).toEqual([])
    await stillServes()
  })

  it('HPACK bomb: a small block that decodes past the header list limit is refused before the phases', async () => {
    const c = await raw()
    const before = seen.length
    // 4 KiB enters the dynamic table once, then 1-byte references to it decode to 8 MiB.
    const refs = Buffer.alloc(2_000, indexed(62))
    c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, Buffer.concat([requestBlock(target(), '/bomb'), indexedLiteral('x-bomb', 'b'.repeat(4_096)), refs])))
    const cut = await c.until((f) => (f.type === FRAME.RST_STREAM && f.stream === 1) || f.type === FRAME.GOAWAY || (f.type === FRAME.HEADERS && f.stream === 1))
    expect(cut).toBeDefined()
    // Whatever the answer (a reset, or a 431-class refusal), the request never went upstream.
    expect(seen.slice(before).filter((s) => s.includes('/bomb'))).toEqual([])
    await stillServes()
  })

  it('SETTINGS flood: thousands of SETTINGS frames get GOAWAY ENHANCE_YOUR_CALM and one row', async () => {
    const c = await raw()
    const one = frame(FRAME.SETTINGS, 0, 0, Buffer.from([0, 3, 0, 0, 0, 100]))
    for (let i = 0; i < 20 && !c.tls.destroyed; i++) {
      c.send(Buffer.concat(Array.from({ length: 1_000 }, () => one)))
      await new Promise((r) => setImmediate(r))
    }
    const g = await c.until(goaway)
    expect(g && codeOf(g)).toBe(CODE.ENHANCE_YOUR_CALM)
    await c.closed
    const rows = await h.audit.waitForDecisions(1)
    expect(rows.some((r) => (r.detail as Record<string, unknown>)?.limit === 'h2_settings')).toBe(true)
    await stillServes()
  })

  describe('downgrade smuggling (h2 in, HTTP/1.1 upstream)', () => {
    const cases: Array<[string, Buffer[], Buffer?]> = [
      ['a DATA frame longer than content-length', [literal('content-length', '0')], Buffer.from('GET /smuggled HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n')],
      ['transfer-encoding: chunked', [literal('transfer-encoding', 'chunked')], Buffer.from('0\r\n\r\nGET /smuggled HTTP/1.1\r\nhost: x\r\n\r\n')],
      ['connection: keep-alive', [literal('connection', 'keep-alive')]],
      ['an uppercase header name', [literal('X-Smuggled', '1')]],
      ['CR LF inside a header value', [literal('x-a', 'b\r\nx-smuggled: 1')]],
      ['a header name with a colon', [literal('x-a:b', 'c')]],
    ]
    for (const [name, fields, body] of cases) {
      it(`${name}: the stream is refused and nothing smuggled reaches the upstream`, async () => {
        const c = await raw()
        const before = seen.length
        const block = requestBlock(target(), '/downgrade', body ? 'POST' : 'GET', ...fields)
        c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS | (body ? 0 : FLAG.END_STREAM), 1, block))
        if (body) c.send(frame(FRAME.DATA, FLAG.END_STREAM, 1, body))
        const answer = await c.until((f) => (f.stream === 1 && (f.type === FRAME.RST_STREAM || f.type === FRAME.HEADERS)) || f.type === FRAME.GOAWAY)
        expect(answer).toBeDefined()
        if (answer!.type !== FRAME.HEADERS) expect(codeOf(answer!)).toBe(CODE.PROTOCOL_ERROR)
        const got = seen.slice(before).join('\n')
        expect(got).not.toMatch(/smuggled/i)
        c.tls.destroy()
      })
    }
  })

  it('extended CONNECT (:protocol) is not advertised and is refused', async () => {
    const c = await raw()
    const before = seen.length
    const s = await c.until((f) => f.type === FRAME.SETTINGS && (f.flags & FLAG.ACK) === 0)
    // SETTINGS_ENABLE_CONNECT_PROTOCOL (0x8) is absent or 0.
    for (let i = 0; s && i + 6 <= s.payload.length; i += 6) if (s.payload.readUInt16BE(i) === 8) expect(s.payload.readUInt32BE(i + 2)).toBe(0)
    const block = Buffer.concat([literal(':method', 'CONNECT'), literal(':protocol', 'websocket'), literal(':scheme', 'https'), literal(':path', '/ws'), literal(':authority', target())])
    c.send(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, block))
    const answer = await c.until((f) => (f.stream === 1 && (f.type === FRAME.RST_STREAM || f.type === FRAME.HEADERS)) || f.type === FRAME.GOAWAY)
    expect(answer).toBeDefined()
    expect(seen.slice(before).filter((x) => x.includes('/ws'))).toEqual([])
    c.tls.destroy()
  })

  describe('h2c on the plaintext leg is not spoken', () => {
    it('prior knowledge (the h2 preface as the first bytes): a bare 400, nothing upstream', async () => {
      const before = seen.length
      const out = await rawExchange(port, [Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'), frame(FRAME.SETTINGS, 0, 0)])
      expect(out.status).toMatch(/^HTTP\/1\.1 400/)
      expect(seen.slice(before).filter((x) => x.startsWith('PRI'))).toEqual([])
    })

    it('Upgrade: h2c is refused like every upgrade, with a row', async () => {
      const before = h.audit.decisions().length
      const out = await rawExchange(port, [`GET http://localhost:${h.up.httpPort}/h2c HTTP/1.1\r\nhost: localhost\r\nproxy-authorization: Bearer ${token}\r\nconnection: Upgrade, HTTP2-Settings\r\nupgrade: h2c\r\nhttp2-settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n`])
      expect(out.status).toMatch(/^HTTP\/1\.1 403/)
      expect(out.text).not.toMatch(/101 Switching/)
      await h.audit.waitForDecisions(before + 1)
      expect(h.audit.decisions().slice(before).filter((r) => r.path === '/h2c')).toMatchObject([{ decision: 'deny', reason: 'no_match' }])
      expect(seen.filter((x) => x.includes('/h2c'))).toEqual([])
    })
  })
})
