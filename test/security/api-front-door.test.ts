// The API port's front door on real sockets (docs/api.md "Connections"): a body over the limit —
// declared too big, sent whole, or chunked and growing — is answered with the 413 envelope, and
// a client still sending reads that answer and sees the connection end cleanly (FIN, not a reset:
// no EPIPE); connections that send nothing, drip their headers or idle between requests are cut
// at their limits; one address cannot hold more than its share of connections.
import { connect, type AddressInfo, type Socket } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { resolveApiLimits } from '../../src/server/limits.js'
import { createHarness, type Harness } from '../server/harness.js'

const MiB = 1024 * 1024

interface Outcome { text: string; error?: string }

/** Headers, then `before` bytes of body; once the whole answer arrived, `after` more bytes, then FIN. */
function oversized(port: number, head: string, o: { before: number; after: number; chunked: boolean }): Promise<Outcome> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1')
    let text = ''
    let error: string | undefined
    let answered = false
    const piece = (n: number) => (o.chunked ? Buffer.concat([Buffer.from(`${n.toString(16)}\r\n`), Buffer.alloc(n, 0x61), Buffer.from('\r\n')]) : Buffer.alloc(n, 0x61))
    const sendAfter = async () => {
      for (let sent = 0; sent < o.after && !s.destroyed; sent += 256 * 1024) {
        if (!s.write(piece(256 * 1024))) await new Promise((r) => s.once('drain', r).once('close', r))
      }
      if (o.chunked && !s.destroyed) s.write('0\r\n\r\n')
      s.end()
    }
    s.on('connect', () => {
      s.write(head)
      for (let sent = 0; sent < o.before; sent += 256 * 1024) s.write(piece(256 * 1024))
    })
    s.on('data', (c: Buffer) => {
      text += c.toString('latin1')
      const end = text.indexOf('\r\n\r\n')
      const length = Number(/content-length: (\d+)/i.exec(text)?.[1] ?? -1)
      if (!answered && end > 0 && text.length - end - 4 >= length) {
        answered = true
        void sendAfter()
      }
    })
    s.on('error', (e: NodeJS.ErrnoException) => (error ??= e.code))
    s.on('close', () => resolve({ text, ...(error ? { error } : {}) }))
  })
}

function closed(s: Socket): Promise<void> {
  return new Promise((r) => (s.destroyed ? r() : s.once('close', () => r())))
}

describe('API port: bodies over the limit', () => {
  let h: Harness
  let port: number
  let key: string
  beforeAll(async () => {
    h = await createHarness()
    ;({ ownerKey: key } = await h.newOrg())
    await h.app.listen({ port: 0, host: '127.0.0.1' })
    port = (h.app.server.address() as AddressInfo).port
  })
  afterAll(() => h.close())

  const routes = ['/v1/secrets', '/v1/tasks', '/v1/agent-roles', '/v1/api-keys', '/v1/no-such-route']
  const shapes = [
    ['Content-Length declared far over the limit', { declared: 512 * MiB, chunked: false, before: 2 * MiB, after: 6 * MiB }],
    ['Content-Length just over the limit, sent whole', { declared: 3 * MiB, chunked: false, before: 1 * MiB, after: 2 * MiB }],
    ['chunked body that grows past the limit', { declared: 0, chunked: true, before: 2 * MiB, after: 6 * MiB }],
  ] as const
  for (const route of routes) {
    it.each(shapes)(`${route}: %s → 413 envelope, read by a client still sending, then a clean close`, async (_n, shape) => {
      const head = `POST ${route} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key}\r\ncontent-type: application/json\r\n` +
        `${shape.chunked ? 'transfer-encoding: chunked' : `content-length: ${shape.declared}`}\r\n\r\n`
      const { text, error } = await oversized(port, head, shape)
      expect(text.slice(0, 200)).toMatch(/^HTTP\/1\.1 413 /)
      expect(text.toLowerCase()).toContain('connection: close')
      const body = JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { error: { code: string; request_id: string } }
      expect(body.error.code).toBe('payload_too_large')
      expect(body.error.request_id).toMatch(/^req_/)
      expect(error, 'the client saw its connection reset while sending').toBeUndefined()
    }, 30_000)
  }

  it('a body within the limit on the same port is still served', async () => {
    const res = await fetch(`http://127.0.0.1:${port}/v1/api-keys`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ label: 'x'.repeat(10), permission_set: 'read_only' }) })
    expect(res.status).toBeLessThan(500)
  })
})

describe('API port: idle, silent and slow connections', () => {
  let h: Harness
  let port: number
  const limits = resolveApiLimits({}, { headersTimeoutMs: 1_000, keepAliveTimeoutMs: 1_000 })
  beforeAll(async () => {
    h = await createHarness({ config: { limits } })
    await h.newOrg()
    await h.app.listen({ port: 0, host: '127.0.0.1' })
    port = (h.app.server.address() as AddressInfo).port
  })
  afterAll(() => h.close())

  const open = () => new Promise<Socket>((resolve) => {
    const s = connect(port, '127.0.0.1', () => resolve(s))
    s.on('error', () => {})
    s.resume()
  })

  it('connections that never send a byte are closed after the header timeout', async () => {
    const socks = await Promise.all(Array.from({ length: 20 }, open))
    await Promise.all(socks.map(closed))
    expect(socks.every((s) => s.destroyed)).toBe(true)
  }, 15_000)

  it.each([
    ['headers dripped a byte at a time', 'GET /v1/me HTTP/1.1\r\nhost: x\r\nx-drip: '],
    ['request line dripped a byte at a time', 'GET /v1/'],
  ])('%s → 408 envelope and the connection closes', async (_name, start) => {
    const s = await open()
    let text = ''
    s.on('data', (c: Buffer) => (text += c.toString('latin1')))
    s.write(start)
    const drip = setInterval(() => !s.destroyed && s.write('a'), 100)
    await closed(s)
    clearInterval(drip)
    expect(text).toMatch(/^HTTP\/1\.1 408 /)
    expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)).error.code).toBe('request_timeout')
  }, 15_000)

  it('an idle keep-alive connection is closed after the keep-alive timeout', async () => {
    const s = await open()
    let text = ''
    s.on('data', (c: Buffer) => (text += c.toString('latin1')))
    s.write('GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n')
    await closed(s)
    expect(text).toMatch(/^HTTP\/1\.1 200 /)
    expect(text.toLowerCase()).toContain('keep-alive: timeout=1')
  }, 15_000)
})

describe('API port: connections per address', () => {
  let h: Harness
  let port: number
  beforeAll(async () => {
    h = await createHarness({ config: { limits: resolveApiLimits({}, { maxConnectionsPerIp: 40 }) } })
    await h.app.listen({ port: 0, host: '127.0.0.1' })
    port = (h.app.server.address() as AddressInfo).port
  })
  afterAll(() => h.close())

  it('one address holds at most its share: the rest are closed at accept, and the port answers once they go', async () => {
    const socks = await Promise.all(Array.from({ length: 60 }, () => new Promise<Socket>((resolve) => {
      const s = connect(port, '127.0.0.1', () => resolve(s))
      s.on('error', () => {})
      s.resume()
    })))
    while (socks.filter((s) => s.destroyed).length < 20) await new Promise((r) => setTimeout(r, 20))
    const extra = connect(port, '127.0.0.1').on('error', () => {}).resume()
    await closed(extra)
    expect(socks.filter((s) => s.destroyed).length).toBe(20)
    const res = await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.status, () => 0)
    expect(res, 'a 41st connection from the same address is refused').toBe(0)
    for (const s of socks) s.destroy()
    await Promise.all(socks.map(closed))
    // The server counts a connection out when it sees it close: retry until it did.
    for (;;) {
      const status = await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.status, () => 0)
      if (status === 200) break
      await new Promise((r) => setTimeout(r, 50))
    }
  }, 15_000)
})

describe('API limits from the environment', () => {
  it('each limit has a variable; a value that is not a positive integer is refused naming it', () => {
    expect(resolveApiLimits({ CORRAL_API_MAX_CONNECTIONS_PER_IP: '7', CORRAL_API_HEADERS_TIMEOUT_MS: '1500' })).toMatchObject({ maxConnectionsPerIp: 7, headersTimeoutMs: 1500 })
    for (const bad of ['0', '-1', '1.5', 'ten']) expect(() => resolveApiLimits({ CORRAL_API_KEEPALIVE_TIMEOUT_MS: bad })).toThrow(/CORRAL_API_KEEPALIVE_TIMEOUT_MS/)
  })
})
