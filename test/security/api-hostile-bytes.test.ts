// Hostile bytes on the API port (the proxy port has proxy-hostile-bytes.test.ts): malformed HTTP
// in its known shapes — obs-fold, Content-Length with Transfer-Encoding, conflicting lengths, bad
// methods and versions, control bytes, truncated requests, clients that vanish mid-body — gets the
// /v1 envelope (or, when nothing can be answered, a closed connection), never a crash; thousands
// of idle connections do not stop the API from answering; slow clients are bounded by timeouts.
import { connect, type AddressInfo, type Socket } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createHarness, type Harness } from '../server/harness.js'

function exchange(port: number, bytes: string, opts: { endAfterWrite?: boolean } = {}): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(bytes, 'latin1')
      if (opts.endAfterWrite) socket.end()
    })
    let text = ''
    socket.setEncoding('latin1')
    socket.on('data', (c) => (text += c))
    socket.on('error', () => {})
    socket.on('close', () => resolve(text))
    socket.setTimeout(3_000, () => socket.destroy())
  })
}

function envelopeOf(text: string): { status: number; code?: string } {
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0)
  const body = text.slice(text.indexOf('\r\n\r\n') + 4)
  try {
    return { status, code: (JSON.parse(body) as { error?: { code?: string } }).error?.code }
  } catch {
    return { status }
  }
}

describe('API port: hostile bytes', () => {
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

  const alive = async () => expect((await h.inject('GET', '/v1/me', { token: key })).status).toBe(200)

  it.each([
    ['obs-fold header', 'GET /v1/me HTTP/1.1\r\nhost: x\r\nx-folded: a\r\n  b\r\n\r\n'],
    ['Content-Length with Transfer-Encoding', 'POST /v1/api-keys HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 4\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n'],
    ['two different Content-Lengths', 'POST /v1/api-keys HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n{}'],
    ['negative Content-Length', 'POST /v1/api-keys HTTP/1.1\r\nhost: x\r\ncontent-length: -1\r\n\r\n'],
    ['bad chunk size', 'POST /v1/api-keys HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n'],
    ['control byte in a header value', 'GET /v1/me HTTP/1.1\r\nhost: x\r\nx-a: a\x01b\r\n\r\n'],
    ['NUL in the request target', 'GET /v1/me\x00 HTTP/1.1\r\nhost: x\r\n\r\n'],
    ['invalid method', 'G\x01T /v1/me HTTP/1.1\r\nhost: x\r\n\r\n'],
    ['HTTP/0.9 request line', 'GET /v1/me\r\n\r\n'],
    ['unknown HTTP version', 'GET /v1/me HTTP/7.3\r\nhost: x\r\n\r\n'],
    ['bare LF line endings', 'GET /v1/me HTTP/1.1\nhost: x\n\n'],
    ['header without a colon', 'GET /v1/me HTTP/1.1\r\nhost: x\r\nno colon here\r\n\r\n'],
    ['space before the colon', 'GET /v1/me HTTP/1.1\r\nhost : x\r\n\r\n'],
  ])('%s → a 4xx envelope or a closed connection, never a crash', async (_name, bytes) => {
    const text = await exchange(port, bytes)
    if (text !== '') {
      const { status, code } = envelopeOf(text)
      expect(status, text.slice(0, 200)).toBeGreaterThanOrEqual(400)
      expect(status, text.slice(0, 200)).toBeLessThan(500)
      expect(typeof code, text.slice(0, 300)).toBe('string')
    }
    await alive()
  })

  it('truncated requests and clients that vanish mid-body end that connection only', async () => {
    for (const bytes of ['GET /v1/me HT', 'GET /v1/me HTTP/1.1\r\nhost: x\r\nx-half', `POST /v1/api-keys HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"label":`]) {
      await exchange(port, bytes, { endAfterWrite: true })
    }
    await alive()
  })

  it('2,000 idle connections: the API still answers, then they all close cleanly', async () => {
    const idle: Socket[] = []
    await Promise.all(
      Array.from({ length: 2_000 }, () =>
        new Promise<void>((resolve) => {
          const s = connect(port, '127.0.0.1', () => resolve())
          s.on('error', () => resolve())
          idle.push(s)
        }),
      ),
    )
    await alive()
    for (const s of idle) s.destroy()
    await alive()
  }, 30_000)

  it('slow clients are bounded: headers within 60 s, the whole request within 5 minutes, idle keep-alive 72 s', () => {
    const server = h.app.server
    expect(server.headersTimeout).toBeGreaterThan(0)
    expect(server.headersTimeout).toBeLessThanOrEqual(60_000)
    expect(server.requestTimeout).toBe(300_000)
    expect(server.keepAliveTimeout).toBeLessThanOrEqual(72_000)
  })
})
