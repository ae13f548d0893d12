// Attack: hostile bytes and hostile peers on the proxy port (issue 14 §1). Malformed HTTP on the
// plaintext leg and inside a tunnel, a TLS handshake of garbage inside a CONNECT, slowloris,
// clients that vanish mid-request and mid-response, upstreams that reset, stall or answer with
// bytes that are not HTTP. For each: a clear answer or a closed connection, the proxy keeps
// serving, and a request that reached the phases has exactly one row. (The in-process proxy: an
// escaped rejection or exception would fail this file as an unhandled error.)
import type { IncomingMessage, ServerResponse } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PLATFORM_ORG, type AuditEvent } from '../../src/contract/index.js'
import { exchangeOn, openTunnel, rawExchange, tlsOver } from '../helpers/raw-socket.js'
import { startHarness, type Harness } from '../proxy/harness.js'

const CAPS = `
- name: up
  type: http
  allow:
    - domains: ["127.0.0.1"]
      methods: [GET, POST]
`

describe('hostile bytes on the proxy port', () => {
  let h: Harness
  let port: number
  let token: string
  let workspaceId: string

  beforeAll(async () => {
    h = await startHarness({ limits: { headersTimeoutMs: 600, requestTimeoutMs: 1_500, idleTimeoutMs: 800, connectTimeoutMs: 600, maxHeaderBytes: 4096, transportRowsPerSecond: 1_000 } })
    port = Number(new URL(h.proxyUrl).port)
    ;({ token, workspaceId } = await h.workspace(CAPS))
    h.up.handler.current = upstream
  })
  afterAll(async () => {
    await h.close()
  })

  const rowsSince = (n: number): AuditEvent[] => h.audit.decisions().slice(n)
  const stillServes = async (): Promise<void> => {
    const res = await h.fetch(`https://127.0.0.1:${h.up.httpsPort}/ok`, { token })
    expect(res.status).toBe(200)
  }

  const plaintext: Array<[string, string, RegExp, string]> = [
    ['garbage', '\x16\x03\x01\x00\xa5\x01\x00garbage\r\n\r\n', /^HTTP\/1\.1 400 /, 'hpe_invalid_method'],
    ['an obs-fold header', 'GET http://localhost/ HTTP/1.1\r\nhost: localhost\r\nx-a: b\r\n folded\r\n\r\n', /^HTTP\/1\.1 400 /, 'hpe_invalid_header_token'],
    ['Content-Length with Transfer-Encoding', 'POST http://localhost/ HTTP/1.1\r\nhost: localhost\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n', /^HTTP\/1\.1 400 /, 'hpe_invalid_transfer_encoding'],
    ['two Content-Lengths', 'POST http://localhost/ HTTP/1.1\r\nhost: localhost\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\nab', /^HTTP\/1\.1 400 /, 'hpe_unexpected_content_length'],
    ['a NUL in the target', 'GET http://localhost/\x00 HTTP/1.1\r\nhost: localhost\r\n\r\n', /^HTTP\/1\.1 400 /, 'hpe_invalid_url'],
    ['an HTTP/2 preface', 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', /^HTTP\/1\.1 400 /, 'hpe_paused_h2_upgrade'],
  ]
  for (const [name, bytes, status, transport] of plaintext) {
    it(`${name}: 400, connection closed, one platform row`, async () => {
      const before = h.audit.decisions().length
      const res = await rawExchange(port, [bytes])
      expect(res.status).toMatch(status)
      expect(res.closed).toBe(true)
      const rows = rowsSince(before)
      expect(rows).toHaveLength(1)
      expect(rows[0]).toMatchObject({ org_id: PLATFORM_ORG, user_id: 'system', decision: 'deny', reason: 'no_scheme', detail: { transport } })
      await stillServes()
    })
  }

  it('huge headers: 431 and a limit_exceeded row naming header_bytes', async () => {
    const before = h.audit.decisions().length
    const res = await rawExchange(port, [`GET http://localhost/ HTTP/1.1\r\nhost: localhost\r\nx-big: ${'a'.repeat(8_000)}\r\n\r\n`])
    expect(res.status).toMatch(/^HTTP\/1\.1 431 /)
    expect(rowsSince(before)).toMatchObject([{ org_id: PLATFORM_ORG, reason: 'limit_exceeded', detail: { limit: 'header_bytes', max: 4096 } }])
  })

  it('slowloris (a header line every 100 ms) and a truncated request line: 408 at the headers timeout', async () => {
    const before = h.audit.decisions().length
    const drip = Array.from({ length: 40 }, (_, i) => [100, `x-${i}: y\r\n`]).flat()
    const [slow, truncated] = await Promise.all([
      rawExchange(port, ['GET http://localhost/ HTTP/1.1\r\n', ...drip], 5_000),
      rawExchange(port, ['GET http://localhost/ HT'], 5_000),
    ])
    for (const r of [slow, truncated]) {
      expect(r.closed).toBe(true)
      expect(r.status).toMatch(/^HTTP\/1\.1 408 /)
    }
    const rows = rowsSince(before)
    expect(rows).toHaveLength(2)
    for (const r of rows) expect(r).toMatchObject({ reason: 'limit_exceeded', detail: { limit: 'request_timeout' } })
  })

  it('a connection that never sends a byte is closed at the headers timeout, with no row', async () => {
    const before = h.audit.decisions().length
    const res = await rawExchange(port, [], 5_000)
    expect(res.closed).toBe(true)
    expect(res.status).toMatch(/^(HTTP\/1\.1 408 .*)?$/)
    expect(rowsSince(before)).toHaveLength(0)
  })

  it('a TLS handshake of garbage inside a CONNECT: closed, one row attributed to the tunnel token', async () => {
    const before = h.audit.decisions().length
    const { socket } = await openTunnel(port, `127.0.0.1:${h.up.httpsPort}`, token)
    const res = await exchangeOn(socket, ['\x16\x03\x01\x00\x05hello garbage that is not a ClientHello\r\n\r\n'])
    expect(res.closed).toBe(true)
    expect(rowsSince(before)).toMatchObject([{ org_id: h.orgId, workspace_id: workspaceId, reason: 'no_scheme', destination: '127.0.0.1', detail: { transport: 'tls_handshake_failed' } }])
    await stillServes()
  })

  it('a tunnel that never starts TLS is closed at the CONNECT timeout', async () => {
    const { socket } = await openTunnel(port, `127.0.0.1:${h.up.httpsPort}`, token)
    const res = await exchangeOn(socket, [], 5_000)
    expect(res.closed).toBe(true)
  })

  it('malformed HTTP inside a tunnel: 400 over TLS, one row for the tunnel org', async () => {
    const before = h.audit.decisions().length
    const { socket } = await openTunnel(port, `127.0.0.1:${h.up.httpsPort}`, token)
    const tls = await tlsOver(socket, '127.0.0.1', h.proxy.ca.certPem)
    const res = await exchangeOn(tls, ['GET /x HTTP/1.1\r\nhost: a\r\ncontent-length: 1\r\ntransfer-encoding: chunked\r\n\r\n'])
    expect(res.status).toMatch(/^HTTP\/1\.1 400 /)
    expect(rowsSince(before)).toMatchObject([{ org_id: h.orgId, workspace_id: workspaceId, reason: 'no_scheme', detail: { transport: 'hpe_invalid_transfer_encoding' } }])
  })

  it('garbage pipelined behind a request whose response is under way: closed, never a 400 inside that response', async () => {
    const before = h.audit.decisions().length
    const { socket } = await openTunnel(port, `127.0.0.1:${h.up.httpsPort}`, token)
    const tls = await tlsOver(socket, '127.0.0.1', h.proxy.ca.certPem)
    const res = await exchangeOn(tls, ['GET /slow HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n', 50, '\x00\x01 not http at all\r\n\r\n'])
    expect(res.closed).toBe(true)
    expect(res.text).not.toContain('400 Bad Request')
    const rows = await waitRows(h, before, 2)
    expect(rows.filter((r) => r.path === '/slow')).toHaveLength(1)
    expect(rows.filter((r) => r.detail?.transport)).toHaveLength(1)
    await stillServes()
  })

  it('a client that vanishes mid-request body: one row, the proxy keeps serving', async () => {
    const before = h.audit.decisions().length
    const { socket } = await openTunnel(port, `127.0.0.1:${h.up.httpsPort}`, token)
    const tls = await tlsOver(socket, '127.0.0.1', h.proxy.ca.certPem)
    tls.write('POST /vanish-body HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 100000\r\n\r\npartial')
    await new Promise((r) => setTimeout(r, 100))
    tls.destroy()
    const rows = await waitRows(h, before, 1)
    expect(rows.filter((r) => r.path === '/vanish-body')).toHaveLength(1)
    await stillServes()
  })

  it('a client that vanishes mid-response: one row with client_closed', async () => {
    const before = h.audit.decisions().length
    const ctrl = new AbortController()
    const res = await h.open(`https://127.0.0.1:${h.up.httpsPort}/stream`, { token, signal: ctrl.signal } as never)
    const reader = res.body!.getReader()
    await reader.read()
    ctrl.abort()
    const rows = (await waitRows(h, before, 1)).filter((r) => r.path === '/stream')
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ decision: 'allow', detail: { client_closed: true } })
    await stillServes()
  })

  const upstreamCases: Array<[string, number, string | undefined]> = [
    ['/reset-before', 502, 'connection_reset'],
    ['/invalid-http', 502, undefined],
  ]
  for (const [path, status, code] of upstreamCases) {
    it(`an upstream that ${path.slice(1)}: ${status} upstream_unavailable, one allow row with detail.upstream_error`, async () => {
      const before = h.audit.decisions().length
      const res = await h.fetch(`https://127.0.0.1:${h.up.httpsPort}${path}`, { token })
      expect(res.status).toBe(status)
      expect(JSON.parse(res.body).error.code).toBe('upstream_unavailable')
      const rows = (await waitRows(h, before, 1)).filter((r) => r.path === path)
      expect(rows).toHaveLength(1)
      expect(rows[0]!.detail?.upstream_error).toBe(code ?? rows[0]!.detail?.upstream_error)
      expect(typeof rows[0]!.detail?.upstream_error).toBe('string')
      await stillServes()
    })
  }

  it('an upstream that resets mid-body: the client is cut (never a response that looks complete), one row', async () => {
    const before = h.audit.decisions().length
    await expect(h.fetch(`https://127.0.0.1:${h.up.httpsPort}/reset-mid`, { token })).rejects.toThrow()
    const rows = (await waitRows(h, before, 1)).filter((r) => r.path === '/reset-mid')
    expect(rows).toHaveLength(1)
    expect(rows[0]!.detail?.upstream_error).toBe('connection_reset')
    await stillServes()
  })

  it('an upstream that stalls: the idle timeout cuts the client, one row', async () => {
    const before = h.audit.decisions().length
    await expect(h.fetch(`https://127.0.0.1:${h.up.httpsPort}/stall`, { token })).rejects.toThrow()
    const rows = (await waitRows(h, before, 1)).filter((r) => r.path === '/stall')
    expect(rows).toHaveLength(1)
    await stillServes()
  })
})

async function waitRows(h: Harness, before: number, n: number): Promise<AuditEvent[]> {
  return (await h.audit.waitForDecisions(before + n)).slice(before)
}

/** The upstream's behaviours, by path. */
function upstream(req: IncomingMessage, res: ServerResponse): void {
  const path = req.url ?? '/'
  if (path === '/reset-before') return void req.socket.destroy()
  if (path === '/invalid-http') return void req.socket.end('this is not HTTP at all\r\n\r\n')
  if (path === '/reset-mid') {
    res.writeHead(200, { 'content-length': '1000' })
    res.write('x'.repeat(100))
    setTimeout(() => req.socket.destroy(), 50)
    return
  }
  if (path === '/stall') return // never answers
  if (path === '/slow') return void setTimeout(() => res.end('slow'), 300)
  if (path === '/stream') {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.write('data: 1\n\n')
    const t = setInterval(() => res.write('data: more\n\n'), 50)
    res.on('close', () => clearInterval(t))
    return
  }
  req.resume()
  res.end('ok')
}
