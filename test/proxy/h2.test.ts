// HTTP/2 inside a CONNECT tunnel: the proxy offers `h2` by ALPN, every stream is a request with its
// own decision row (`detail.protocol: h2`), h2 goes upstream when the upstream offers it, bodies of
// unknown length and trailers are relayed, and the per-connection and per-workspace stream bounds
// hold. Real node:http2 client and server, real TLS, the real proxy; and curl --http2.
import { execFile } from 'node:child_process'
import { writeFile } from 'node:fs/promises'
import { constants } from 'node:http2'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { AuditEvent } from '../../src/contract/index.js'
import { onLoopback } from '../helpers/loopback-caps.js'
import { startHarness, type Harness } from './harness.js'
import { h2Request, h2Through, startH2Upstream, type H2Upstream } from './h2-harness.js'

const CAPS = `
- name: api
  type: http
  allow:
    - name: tls
      domains: ["127.0.0.1"]
      methods: [GET, POST, HEAD]
      paths: ["/ok", "/echo", "/trailers", "/slow", "/big", "/hold/**"]
`

describe('HTTP/2 through the proxy', () => {
  let h: Harness
  let up: H2Upstream
  let token = ''
  let before = 0
  const rows = async (n = 1): Promise<AuditEvent[]> => (await h.audit.waitForDecisions(before + n)).slice(before)
  const held: Array<() => void> = []

  beforeAll(async () => {
    h = await startHarness({ limits: { maxStreamsPerConnection: 8, maxInFlightPerWorkspace: 4 } })
    up = await startH2Upstream(h)
    // The h2 upstream listens on a port of its own, which the policy names.
    token = (await h.workspace(onLoopback(CAPS, up.port), 'idle', { raw: true })).token
    up.handler.current = (req, res) => {
      const path = req.url.split('?')[0]!
      if (path === '/echo') {
        const chunks: Buffer[] = []
        req.on('data', (c: Buffer) => chunks.push(c))
        req.on('end', () => res.end(JSON.stringify({ version: req.httpVersion, got: Buffer.concat(chunks).toString(), te: req.headers.te ?? null })))
        return
      }
      if (path === '/trailers') {
        res.writeHead(200, { 'content-type': 'text/plain' })
        res.addTrailers({ 'x-checksum': 'abc123', 'grpc-status': '0' })
        res.end('with trailers')
        return
      }
      if (path.startsWith('/hold/')) {
        res.writeHead(200)
        res.write('held\n')
        held.push(() => res.end('done'))
        return
      }
      res.end(JSON.stringify({ version: req.httpVersion, authority: req.headers[':authority'] ?? null }))
    }
  })
  afterAll(async () => {
    await up?.close()
    await h?.close()
  })
  beforeEach(() => {
    before = h.audit.decisions().length
  })

  const target = (): string => `127.0.0.1:${up.port}`
  const wsToken = async (): Promise<string> => token

  it('negotiates h2 and speaks h2 upstream; the row says protocol h2 and the upstream status', async () => {
    const s = await h2Through(h, target(), await wsToken())
    try {
      expect(s.alpnProtocol).toBe('h2')
      const res = await h2Request(s, { ':path': '/ok' })
      expect(res.status).toBe(200)
      expect(JSON.parse(res.body)).toEqual({ version: '2.0', authority: target() })
      const [row] = await rows()
      expect(row).toMatchObject({ decision: 'allow', method: 'GET', path: '/ok', destination: '127.0.0.1', detail: { protocol: 'h2', upstream_status: 200, response_complete: true } })
    } finally {
      s.close()
    }
  })

  it('concurrent streams on one connection are each a request with its own row', async () => {
    const s = await h2Through(h, target(), await wsToken())
    try {
      const answers = await Promise.all([1, 2, 3].map((i) => h2Request(s, { ':path': `/ok?i=${i}` })))
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200])
      const denied = await h2Request(s, { ':path': '/secret' })
      expect(denied.status).toBe(403)
      expect(denied.headers['x-corral-deny-reason']).toBe('no_match')
      const got = await rows(4)
      expect(got.filter((r) => r.decision === 'allow')).toHaveLength(3)
      expect(got.find((r) => r.decision === 'deny')).toMatchObject({ path: '/secret', reason: 'no_match', detail: { protocol: 'h2' } })
    } finally {
      s.close()
    }
  })

  it('a request body without content-length (h2 framing) reaches the upstream whole, te: trailers kept', async () => {
    const s = await h2Through(h, target(), await wsToken())
    try {
      const payload = 'x'.repeat(200_000)
      const res = await h2Request(s, { ':method': 'POST', ':path': '/echo', te: 'trailers' }, payload)
      expect(res.status).toBe(200)
      const got = JSON.parse(res.body) as { version: string; got: string; te: string | null }
      expect(got.version).toBe('2.0')
      expect(got.got.length).toBe(payload.length)
      expect(got.te).toBe('trailers')
      const [row] = await rows()
      expect(row).toMatchObject({ decision: 'allow', method: 'POST', detail: { protocol: 'h2', response_complete: true } })
    } finally {
      s.close()
    }
  })

  it('trailers from the upstream reach the client; the row takes grpc-status from them', async () => {
    const s = await h2Through(h, target(), await wsToken())
    try {
      const res = await h2Request(s, { ':path': '/trailers' })
      expect(res.body).toBe('with trailers')
      expect(res.trailers).toMatchObject({ 'x-checksum': 'abc123', 'grpc-status': '0' })
      const [row] = await rows()
      expect(row!.detail).toMatchObject({ protocol: 'h2', grpc_status: 0 })
    } finally {
      s.close()
    }
  })

  it('an h2 client reaches an HTTP/1.1-only upstream (h2 in, HTTP/1.1 out)', async () => {
    const ws = await h.workspace(CAPS)
    const s = await h2Through(h, `127.0.0.1:${h.up.httpsPort}`, ws.token)
    h.up.handler.current = (req, res) => res.end(`h1 upstream saw ${req.httpVersion} ${req.headers.host}`)
    try {
      const res = await h2Request(s, { ':path': '/ok' })
      expect(res.body).toBe(`h1 upstream saw 1.1 127.0.0.1:${h.up.httpsPort}`)
      expect((await rows())[0]).toMatchObject({ decision: 'allow', detail: { protocol: 'h2', upstream_status: 200 } })
    } finally {
      s.close()
    }
  })

  it('advertises the per-connection stream limit; past the per-workspace in-flight limit streams get 429 with rows', async () => {
    const s = await h2Through(h, target(), await wsToken())
    try {
      await new Promise<void>((r) => (s.remoteSettings.maxConcurrentStreams === 8 ? r() : s.once('remoteSettings', () => r())))
      expect(s.remoteSettings.maxConcurrentStreams).toBe(8)
      expect(s.remoteSettings.enableConnectProtocol).toBe(false)
      // Four streams held open at the upstream fill the workspace's in-flight limit.
      const holding = [1, 2, 3, 4].map((i) => h2Request(s, { ':path': `/hold/${i}` }))
      while (held.length < 4) await new Promise((r) => setTimeout(r, 10))
      const over = await h2Request(s, { ':path': '/ok' })
      expect(over.status).toBe(429)
      expect(over.headers['x-corral-deny-reason']).toBe('limit_exceeded')
      for (const release of held.splice(0)) release()
      expect((await Promise.all(holding)).map((a) => a.status)).toEqual([200, 200, 200, 200])
      const got = await rows(5)
      expect(got.find((r) => r.decision === 'deny')).toMatchObject({ reason: 'limit_exceeded', detail: { limit: 'inflight_per_workspace', protocol: 'h2' } })
    } finally {
      s.close()
    }
  })

  it('CONNECT inside an h2 tunnel is refused with a row', async () => {
    const s = await h2Through(h, target(), await wsToken())
    try {
      const res = await h2Request(s, { ':method': 'CONNECT', ':authority': 'internal.example:443' })
      expect(res.status).toBe(403)
      const [row] = await rows()
      expect(row).toMatchObject({ decision: 'deny', method: 'CONNECT', reason: 'no_match', destination: 'internal.example', detail: { protocol: 'h2' } })
    } finally {
      s.close()
    }
  })

  it('curl --http2 through the proxy speaks h2 inside the tunnel', async () => {
    const ca = join(h.dir, 'corral-ca.pem')
    await writeFile(ca, h.proxy.ca.certPem)
    const { stdout } = await promisify(execFile)('curl', ['-sS', '-m', '10', '--http2', '-x', h.proxyUrl, '--proxy-header', `Proxy-Authorization: Bearer ${await wsToken()}`, '--cacert', ca, '-w', '\\n%{http_version} %{http_code}', `https://${target()}/ok`])
    const [body, tail] = stdout.split('\n')
    expect(tail).toBe('2 200')
    expect(JSON.parse(body!)).toMatchObject({ version: '2.0' })
    expect((await rows())[0]).toMatchObject({ decision: 'allow', detail: { protocol: 'h2' } })
  })

  it('a stream the client resets mid-answer leaves one row and the connection serving', async () => {
    const s = await h2Through(h, target(), await wsToken())
    try {
      const stream = s.request({ ':method': 'GET', ':path': '/hold/reset' })
      await new Promise<void>((r) => stream.once('response', () => r()))
      stream.close(constants.NGHTTP2_CANCEL)
      const [row] = await rows()
      expect(row).toMatchObject({ path: '/hold/reset', detail: { protocol: 'h2', response_complete: false } })
      held.splice(0).forEach((f) => f())
      expect((await h2Request(s, { ':path': '/ok' })).status).toBe(200)
    } finally {
      s.close()
    }
  })
})
