// Fuzz of the proxy front (issue 14 §1): generated hostile requests on real loopback sockets, on
// the plaintext port and inside intercepted tunnels, with raw writes and with a real HTTP client.
// Properties: every answer is one the proxy documents (a deny body with a known reason, a bare
// 400/408/413/431, an upstream's answer for an allowed request, Node's 100/417 for Expect), no
// handler faults, every row passes the audit writer's validation, no row is written twice, and the
// proxy serves a normal request afterwards. Bounded in time (fast-check's time limit).
import { request as undiciRequest, ProxyAgent } from 'undici'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DENY_REASONS } from '../../src/contract/index.js'
import { exchangeOn, openTunnel, rawExchange, tlsOver, type RawResult } from '../helpers/raw-socket.js'
import { startHarness, type Harness } from '../proxy/harness.js'

const CAPS = `
- name: up
  type: http
  allow:
    - domains: ["127.0.0.1"]
      methods: [GET, POST]
    - domains: ["localhost"]
      methods: [GET]
      allow_insecure: true
`

const STATUS = /^HTTP\/1\.1 (100|200|400|403|404|407|408|413|417|429|431|500|502|503) /
const REASONS = new Set<string>(DENY_REASONS)

describe('fuzzing the proxy front', () => {
  let h: Harness
  let port: number
  let token: string
  let marker = 0
  let runs = 0

  beforeAll(async () => {
    h = await startHarness({ limits: { headersTimeoutMs: 400, requestTimeoutMs: 800, idleTimeoutMs: 1_000, connectTimeoutMs: 500, maxHeaderBytes: 8 * 1024, maxBodyBytes: 64 * 1024, transportRowsPerSecond: 10_000 } })
    port = Number(new URL(h.proxyUrl).port)
    ;({ token } = await h.workspace(CAPS))
  })
  afterAll(async () => {
    console.log(`proxy fuzz: ${runs} generated requests`)
    await h.close()
  })

  /** Checks one answer against the documented set; returns the deny reason when there was one. */
  const checkAnswer = (r: RawResult): void => {
    if (!r.status) return // closed without an answer: allowed for garbage and timeouts
    // Several pipelined answers may come back; each status line must be documented.
    for (const line of r.text.split('\r\n').filter((l) => l.startsWith('HTTP/'))) expect(line).toMatch(STATUS)
    for (const m of r.text.matchAll(/x-corral-deny-reason: ([a-z_]+)/g)) expect(REASONS.has(m[1]!)).toBe(true)
    for (const m of r.text.matchAll(/"reason":"([^"]*)"/g)) expect(REASONS.has(m[1]!)).toBe(true)
  }

  const token$ = fc.constantFrom('none', 'valid', 'garbage')
  const method = fc.constantFrom('GET', 'POST', 'HEAD', 'PUT', 'DELETE', 'OPTIONS', 'CONNECT', 'TRACE', 'PRI', 'get', 'G\x00T', 'GE T', '')
  const pathPart = fc.oneof(
    fc.constantFrom('/', '/a/../..', '/%2e%2e/x', '/%2F', '/a//b', '/\\x', '/%zz', '/?q=1', '*', '/\x00', '/ü', '/' + 'a'.repeat(9_000)),
    fc.string({ maxLength: 30 }),
  )
  const header = fc.oneof(
    fc.tuple(fc.constantFrom('content-length', 'Content-Length'), fc.constantFrom('0', '5', '-1', '99999999999', 'abc', '5, 5')),
    fc.tuple(fc.constantFrom('transfer-encoding'), fc.constantFrom('chunked', 'gzip, chunked', 'chunked, gzip', 'identity', 'xchunked')),
    fc.tuple(fc.constantFrom('expect'), fc.constantFrom('100-continue', 'garbage')),
    fc.tuple(fc.constantFrom('connection'), fc.constantFrom('close', 'keep-alive', 'upgrade', 'te, x-foo')),
    fc.tuple(fc.constantFrom('upgrade'), fc.constantFrom('websocket', 'h2c')),
    fc.tuple(fc.constantFrom('host', 'Host', ' host', 'ho st', 'x-a\x00'), fc.string({ maxLength: 20 })),
    fc.tuple(fc.string({ minLength: 1, maxLength: 10 }), fc.string({ maxLength: 40 })),
  )
  const eol = fc.constantFrom('\r\n', '\r\n', '\r\n', '\n', '\r')
  const request = fc.record({
    method, path: pathPart, version: fc.constantFrom('HTTP/1.1', 'HTTP/1.1', 'HTTP/1.0', 'HTTP/2.0', 'HTTP/9', ''),
    absolute: fc.constantFrom('http://localhost:UP', 'https://127.0.0.1:UPS', '127.0.0.1:UPS', '', 'http://[::1', 'ftp://x'),
    headers: fc.array(header, { maxLength: 6 }), eol, fold: fc.boolean(), body: fc.string({ maxLength: 200 }),
    cut: fc.option(fc.nat({ max: 400 }), { nil: undefined }), token: token$, binary: fc.option(fc.uint8Array({ maxLength: 64 }), { nil: undefined }),
  })

  type Req = typeof request extends fc.Arbitrary<infer T> ? T : never
  const render = (q: Req, inTunnel: boolean, id: string): Buffer => {
    if (q.binary) return Buffer.from(q.binary)
    const base = (inTunnel ? '' : q.absolute).replace('UPS', String(h.up.httpsPort)).replace('UP', String(h.up.httpPort))
    const target = q.method === 'CONNECT' && base && !base.includes('/') ? base : `${base}${q.path.startsWith('/') ? '' : '/'}${q.path}${q.path.includes('?') ? '&' : '?'}f=${id}`
    const lines = [`${q.method} ${target} ${q.version}`.trimEnd()]
    lines.push(`host: 127.0.0.1`)
    if (!inTunnel && q.token === 'valid') lines.push(`proxy-authorization: Bearer ${token}`)
    if (!inTunnel && q.token === 'garbage') lines.push('proxy-authorization: Bearer x.y.z')
    for (const [k, v] of q.headers) lines.push(`${k}: ${v}`)
    if (q.fold) lines.push(' folded continuation')
    lines.push('connection: close')
    const text = lines.join(q.eol) + q.eol + q.eol + q.body
    const bytes = Buffer.from(text, 'utf8')
    return q.cut !== undefined ? bytes.subarray(0, q.cut) : bytes
  }

  it('raw bytes on the plaintext port and inside tunnels', async () => {
    const ids = new Set<string>()
    await fc.assert(
      fc.asyncProperty(request, fc.boolean(), async (r, inTunnel) => {
        const id = `fz${marker++}`
        const bytes = render(r, inTunnel, id)
        let res: RawResult
        if (inTunnel && r.token === 'none') {
          // A CONNECT without credentials is challenged (407), never tunnelled.
          await expect(openTunnel(port, `127.0.0.1:${h.up.httpsPort}`, undefined)).rejects.toThrow(/ 407 /)
          return
        }
        if (inTunnel) {
          const { socket } = await openTunnel(port, `127.0.0.1:${h.up.httpsPort}`, r.token === 'valid' ? token : 'x.y.z')
          const tls = await tlsOver(socket, '127.0.0.1', h.proxy.ca.certPem)
          res = await exchangeOn(tls, [bytes, null], 3_000)
        } else res = await rawExchange(port, [bytes, null], 3_000)
        checkAnswer(res)
        runs++
        for (const row of h.audit.decisions()) {
          expect(ids.has(row.id) && row.path?.includes(id)).toBeFalsy()
        }
        expect(h.audit.decisions().filter((row) => JSON.stringify(row).includes(`f=${id}`) || row.path?.includes(id)).length).toBeLessThanOrEqual(1)
      }),
      { numRuns: 400, interruptAfterTimeLimit: 9_000, endOnFailure: true },
    )
    const allIds = h.audit.rows.map((r) => r.id)
    expect(new Set(allIds).size).toBe(allIds.length)
    expect(h.proxy.stats()).toMatchObject({ handlerFaults: 0, auditFailures: 0 })
    expect((await h.fetch(`https://127.0.0.1:${h.up.httpsPort}/after-fuzz`, { token })).status).toBe(200)
  }, 20_000)

  it('a real HTTP client with generated methods, paths, headers and bodies', async () => {
    const agent = new ProxyAgent({ uri: h.proxyUrl, token: `Bearer ${token}`, requestTls: { ca: h.proxy.ca.certPem } })
    const tokenChar = fc.constantFrom(...'abcxyzABC0123-_.!#$%&\'*+^`|~'.split(''))
    const name = fc.string({ unit: tokenChar, minLength: 1, maxLength: 12 })
    try {
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS', 'TRACE', 'PROPFIND', 'X-CUSTOM'),
          fc.string({ unit: fc.constantFrom('a', 'b', '/', '.', '%', '2', 'e', 'F', '~', '-', '_', ';', '=', '@', ':'), maxLength: 40 }),
          fc.array(fc.tuple(name, fc.string({ unit: fc.constantFrom('a', ' ', '1', '"', ',', ';', '='), maxLength: 30 })), { maxLength: 5 }),
          fc.option(fc.string({ maxLength: 300 }), { nil: undefined }),
          fc.boolean(),
          async (method, path, headers, body, https) => {
            const url = https ? `https://127.0.0.1:${h.up.httpsPort}/${path}` : `http://localhost:${h.up.httpPort}/${path}`
            const hdrs: Record<string, string> = {}
            for (const [k, v] of headers) if (!/^(host|content-length|transfer-encoding|connection|upgrade|expect|keep-alive|te|trailer|proxy-.*)$/i.test(k)) hdrs[k] = v
            const res = await undiciRequest(url, {
              dispatcher: agent, method, headers: hdrs, ...(body !== undefined && method !== 'GET' && method !== 'HEAD' ? { body } : {}),
            }).catch((err: Error) => err)
            if (res instanceof Error) return // the client refused to send it (invalid input on its side)
            const text = await res.body.text()
            expect([200, 400, 403, 404, 413, 429, 502, 503]).toContain(res.statusCode)
            const reason = res.headers['x-corral-deny-reason']
            if (reason) {
              expect(REASONS.has(String(reason))).toBe(true)
              if (method !== 'HEAD') expect(JSON.parse(text).error.reason).toBe(reason)
            }
            runs++
          },
        ),
        { numRuns: 300, interruptAfterTimeLimit: 6_000, endOnFailure: true },
      )
    } finally {
      await agent.close()
    }
    const allIds = h.audit.rows.map((r) => r.id)
    expect(new Set(allIds).size).toBe(allIds.length)
    expect(h.proxy.stats()).toMatchObject({ handlerFaults: 0, auditFailures: 0 })
  }, 15_000)
})
