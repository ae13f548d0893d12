// Class: WebSocket as an attacker uses it. Before, every upgrade was refused outright (nothing to
// attack but nothing usable either); now an allowed upgrade opens a relay, so each way a hostile
// agent or upstream could use that relay is tried here against the real proxy, real TLS and a
// real `ws` upstream: an HTTP request smuggled behind the upgrade (pipelined before the 101, or
// after an upstream refused the upgrade), a 101 from an upstream to a request that never asked
// for one, a 101 agreeing to compression or a subprotocol nobody offered, messages over the size
// limit either way, unmasked client frames and masked server frames, an upgrade to a host or path the policy never named,
// an agent offering permessage-deflate (refused: the proxy must read every payload), a message that
// passes the size limit after fragments of it were relayed, and frames a streaming relay must refuse
// (a compressed frame nobody negotiated, a continuation with no message, a message inside another).
import { randomBytes } from 'node:crypto'
import { connect as tlsConnect, type TLSSocket } from 'node:tls'
import { beforeAll, describe, expect, it } from 'vitest'
import { exchangeOn, openTunnel, rawExchange } from '../helpers/raw-socket.js'
import { wsSuite } from '../helpers/ws-suite.js'
import { closed, nextMessage, opened, wsTunnel } from '../proxy/ws-helpers.js'

const CAPS = `
- name: sockets
  type: http
  allow:
    - domains: ["127.0.0.1"]
      methods: [GET]
      paths: ["/echo", "/refuse", "/deflate", "/badproto", "/big", "/sneaky", "/masked"]
      allow_insecure: true
`

const MAX = 1024

describe('WebSocket attacks', () => {
  const suite = wsSuite({ limits: { wsMaxMessageBytes: MAX } })
  const { newRows } = suite
  let token: string
  const paths: string[] = []
  const proxyPort = (): number => Number(new URL(suite.h.proxyUrl).port)

  /** TLS inside a CONNECT tunnel to the HTTPS upstream, the corral CA trusted. */
  async function tunnel(target = `127.0.0.1:${suite.h.up.httpsPort}`): Promise<TLSSocket> {
    const { socket } = await openTunnel(proxyPort(), target, token)
    return new Promise((resolve, reject) => {
      const t = tlsConnect({ socket, host: '127.0.0.1', ca: suite.h.proxy.ca.certPem }, () => resolve(t))
      t.once('error', reject)
    })
  }
  const upgrade = (path: string, host = `127.0.0.1:${suite.h.up.httpsPort}`): string =>
    `GET ${path} HTTP/1.1\r\nhost: ${host}\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-key: ${randomBytes(16).toString('base64')}\r\nsec-websocket-version: 13\r\n\r\n`

  beforeAll(async () => {
    suite.h.up.handler.current = (req, res) => {
      paths.push(req.url ?? '')
      if (req.url === '/sneaky') {
        // A 101 to a request that asked for no upgrade, then bytes that look like a response.
        req.socket.write('HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nsmuggled')
        return
      }
      res.end('ok')
    }
    token = (await suite.h.workspace(CAPS)).token
  })

  it('an HTTP request pipelined behind the upgrade, before its 101, is refused (400 and a row) and never reaches the upstream', async () => {
    const s = await tunnel()
    const smuggled = `GET /smuggled-in-tunnel HTTP/1.1\r\nhost: 127.0.0.1:${suite.h.up.httpsPort}\r\n\r\n`
    const r = await exchangeOn(s as never, [upgrade('/echo') + smuggled])
    expect(r.status).toBe('HTTP/1.1 400 Bad Request')
    expect(r.text).not.toContain('101 Switching')
    expect(r.closed).toBe(true)
    // Plain HTTP, the same shape.
    const plain = await rawExchange(proxyPort(), [upgrade(`http://127.0.0.1:${suite.h.up.httpPort}/echo`, `127.0.0.1:${suite.h.up.httpPort}`).replace('\r\n\r\n', `\r\nproxy-authorization: Bearer ${token}\r\n\r\n`) + `GET /smuggled-plain HTTP/1.1\r\nhost: x\r\n\r\n`])
    expect(plain.status).toBe('HTTP/1.1 400 Bad Request')
    const rows = await newRows(2)
    for (const row of rows) expect(row).toMatchObject({ decision: 'deny', reason: 'no_match', detail: { websocket: 'early_data' } })
    expect(paths.filter((p) => p.startsWith('/smuggled'))).toEqual([])
  })

  it('after an upstream refuses the upgrade (403), the connection is closed: a request written next is never read', async () => {
    const s = await tunnel()
    const r = await exchangeOn(s as never, [upgrade('/refuse'), 300, `GET /after-refusal HTTP/1.1\r\nhost: 127.0.0.1:${suite.h.up.httpsPort}\r\n\r\n`])
    expect(r.status).toBe('HTTP/1.1 403 Forbidden')
    expect(r.text).toContain('connection: close')
    expect(r.closed).toBe(true)
    expect(r.text.match(/HTTP\/1\.1 /g)).toHaveLength(1)
    expect(paths).not.toContain('/after-refusal')
    const [row] = await newRows(1)
    expect(row!.detail).toMatchObject({ upstream_status: 403 })
  })

  it('a 101 to a request that asked for no upgrade is not relayed: 502, and the bytes behind it never reach the agent', async () => {
    const res = await suite.h.fetch(`https://127.0.0.1:${suite.h.up.httpsPort}/sneaky`, { token })
    expect(res.status).toBe(502)
    expect(res.body).not.toContain('smuggled')
    const [row] = await newRows(1)
    expect(row).toMatchObject({ decision: 'allow', path: '/sneaky' })
    expect(row!.detail).toMatchObject({ response_complete: false })
  })

  it('a 101 agreeing to compression or a subprotocol nobody offered is refused: 502 websocket_handshake, no socket', async () => {
    for (const path of ['/deflate', '/badproto']) {
      const r = await opened(await wsTunnel(suite.h, token, path))
      expect(r).toMatchObject({ open: false, status: 502 })
    }
    const rows = await newRows(2)
    for (const row of rows) expect(row!.detail).toMatchObject({ upstream_error: 'websocket_handshake' })
  })

  it('an agent offering permessage-deflate gets a socket without it (the proxy reads every payload)', async () => {
    const c = await wsTunnel(suite.h, token, '/echo', { deflate: true })
    expect(await opened(c)).toEqual({ open: true })
    expect(c.extensions).toBe('')
    expect(suite.up.last.headers['sec-websocket-extensions']).toBeUndefined()
    c.send('x')
    await nextMessage(c)
    c.close(1000)
    await closed(c)
    await newRows(1)
  })

  it('a message over the size limit closes the socket 1009, from the agent or from the upstream, with the row', async () => {
    const c = await wsTunnel(suite.h, token, '/echo')
    expect(await opened(c)).toEqual({ open: true })
    const end = closed(c)
    c.send(Buffer.alloc(MAX + 1, 1))
    expect((await end).code).toBe(1009)
    const big = await wsTunnel(suite.h, token, '/big')
    const bigEnd = closed(big)
    expect(await opened(big)).toEqual({ open: true })
    expect((await bigEnd).code).toBe(1009)
    const rows = await newRows(2)
    expect(rows[0]!.detail).toMatchObject({ websocket: { error: 'agent:WS_ERR_UNSUPPORTED_MESSAGE_LENGTH', to_upstream: { messages: 0 } } })
    expect(rows[1]!.detail).toMatchObject({ websocket: { error: 'upstream:WS_ERR_UNSUPPORTED_MESSAGE_LENGTH', close_code: 1009, to_agent: { messages: 0 } } })
  })

  it('a message that passes the size limit in its third fragment: the two before it were relayed, the third never is, 1009', async () => {
    const c = await wsTunnel(suite.h, token, '/echo')
    expect(await opened(c)).toEqual({ open: true })
    let echoed = 0
    c.on('message', () => echoed++)
    const end = closed(c)
    c.send(Buffer.alloc(MAX / 2, 1), { fin: false })
    c.send(Buffer.alloc(MAX / 2, 2), { fin: false })
    c.send(Buffer.alloc(1, 3), { fin: true })
    expect((await end).code).toBe(1009)
    expect(echoed).toBe(0)
    const [row] = await newRows(1)
    expect(row!.detail).toMatchObject({ websocket: { close_code: 1009, upstream_close_code: 1009, error: 'agent:WS_ERR_UNSUPPORTED_MESSAGE_LENGTH', to_upstream: { messages: 0, bytes: MAX } } })
  })

  it('frames the relay cannot pass on as they are: a compressed frame (RSV1, nothing negotiated), a continuation with no message, a new message inside another: 1002', async () => {
    const masked = (b0: number, payload: Buffer): Buffer => {
      const key = randomBytes(4)
      return Buffer.concat([Buffer.from([b0, 0x80 | payload.length]), key, Buffer.from(payload.map((b, i) => b ^ key[i % 4]!))])
    }
    const cases: { frames: Buffer; error: string }[] = [
      { frames: masked(0xc1, Buffer.from('deflated?')), error: 'agent:WS_ERR_UNEXPECTED_RSV_1' },
      { frames: masked(0x80, Buffer.from('orphan')), error: 'agent:WS_ERR_INVALID_OPCODE' },
      { frames: Buffer.concat([masked(0x01, Buffer.from('one ')), masked(0x81, Buffer.from('two'))]), error: 'agent:WS_ERR_INVALID_OPCODE' },
    ]
    for (const { frames, error } of cases) {
      const r = await exchangeOn((await tunnel()) as never, [upgrade('/echo'), 300, frames])
      expect(r.status).toBe('HTTP/1.1 101 Switching Protocols')
      expect(r.text).toContain('\x88\x02\x03\xea')
      const [row] = await newRows(1)
      expect(row!.detail).toMatchObject({ websocket: { close_code: 1002, to_upstream: { messages: 0 }, error } })
      suite.before++
    }
  })

  it('invalid UTF-8 in a text message, found while it streams: 1007 on both legs, the valid fragment before it relayed, the message never whole', async () => {
    const c = await wsTunnel(suite.h, token, '/echo')
    expect(await opened(c)).toEqual({ open: true })
    let echoed = 0
    c.on('message', () => echoed++)
    const end = closed(c)
    c.send(Buffer.from('valid '), { fin: false, binary: false })
    c.send(Buffer.from([0xc3, 0x28]), { fin: true })
    expect((await end).code).toBe(1007)
    expect(echoed).toBe(0)
    const [row] = await newRows(1)
    expect(row!.detail).toMatchObject({ websocket: { close_code: 1007, upstream_close_code: 1007, error: 'agent:WS_ERR_INVALID_UTF8', to_upstream: { messages: 0, bytes: 6 } } })
  })

  it('an unmasked frame from the agent is a protocol error: close 1002, nothing relayed', async () => {
    const s = await tunnel()
    const payload = Buffer.from('unmasked')
    const frame = Buffer.concat([Buffer.from([0x81, payload.length]), payload])
    const r = await exchangeOn(s as never, [upgrade('/echo'), 300, frame])
    expect(r.status).toBe('HTTP/1.1 101 Switching Protocols')
    // The close frame the proxy sent: opcode 8, code 1002.
    expect(r.text).toContain('\x88\x02\x03\xea')
    expect(r.text).not.toContain('unmasked')
    const [row] = await newRows(1)
    expect(row!.detail).toMatchObject({ websocket: { close_code: 1002, to_upstream: { messages: 0 }, error: 'agent:WS_ERR_EXPECTED_MASK' } })
  })

  it('a masked frame from the upstream is a protocol error on its leg: the agent is closed 1002 and never sees it', async () => {
    const c = await wsTunnel(suite.h, token, '/masked')
    let got = 0
    c.on('message', () => got++)
    const end = closed(c)
    expect(await opened(c)).toEqual({ open: true })
    expect((await end).code).toBe(1002)
    expect(got).toBe(0)
    const [row] = await newRows(1)
    expect(row!.detail).toMatchObject({ websocket: { closed_by: 'upstream', close_code: 1002, error: 'upstream:WS_ERR_UNEXPECTED_MASK', to_agent: { messages: 0 } } })
  })

  it('an upgrade to a host or a path the policy does not name is denied with a row, never opened upstream', async () => {
    const other = await opened(await wsTunnel(suite.h, token, '/echo', { target: `localhost:${suite.h.up.httpsPort}` }))
    expect(other).toMatchObject({ open: false, status: 403, reason: 'no_match' })
    const path = await opened(await wsTunnel(suite.h, token, '/admin'))
    expect(path).toMatchObject({ open: false, status: 403, reason: 'no_match' })
    const rows = await newRows(2)
    expect(rows.map((r) => r.reason)).toEqual(['no_match', 'no_match'])
    expect(suite.up.last.url).not.toBe('/admin')
  })
})
