// The API's front door (src/server/edge.ts, src/contract/input-limits.ts), on a real socket and on both
// dialects: every string that enters (body, key, query, path id) is checked once at the edge —
// NUL, lone surrogates and deep nesting are a 400 validation_error with details.fields, never a
// 500 or a row the database refuses (which used to stall the audit writer on PostgreSQL) — and
// the errors fastify and Node's HTTP parser raise before any route are in the /v1 envelope.
import { connect, type AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MAX_JSON_DEPTH } from '../../src/audit/encode.js'
import { INPUT_LIMITS } from '../../src/contract/index.js'
import { testDialects } from '../helpers/dialects.js'
import { createHarness, type Harness } from './harness.js'

/** Sends raw bytes, returns the status line's code, headers and parsed JSON body of the answer. */
function rawRequest(port: number, bytes: string): Promise<{ status: number; headers: Record<string, string>; body: any; text: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(bytes))
    let text = ''
    socket.setEncoding('latin1')
    socket.on('data', (c) => (text += c))
    socket.on('error', () => {}) // the server may reset after answering; the answer is what counts
    socket.on('close', () => {
      const [head = '', body = ''] = text.split('\r\n\r\n', 2)
      const [statusLine, ...lines] = head.split('\r\n')
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]))
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine ?? '')?.[1])
      if (!status) return reject(new Error(`no HTTP answer: ${JSON.stringify(text.slice(0, 200))}`))
      let parsed: unknown
      try {
        parsed = JSON.parse(body)
      } catch {
        parsed = undefined
      }
      resolve({ status, headers, body: parsed, text })
    })
    socket.setTimeout(5_000, () => socket.destroy())
  })
}

const expectEnvelope = (res: { status: number; body: any; headers: Record<string, unknown> }, status: number, code: string) => {
  expect(res.status).toBe(status)
  expect(res.body?.error).toMatchObject({ code, message: expect.any(String), request_id: expect.stringMatching(/^req_/) })
  expect(res.headers['x-request-id']).toBe(res.body.error.request_id)
}

it('accepts no nesting that the audit log would quarantine once the body sits inside a row (8 levels of margin)', () => {
  expect(INPUT_LIMITS.maxDepth + 8).toBeLessThanOrEqual(MAX_JSON_DEPTH)
})

for (const d of testDialects()) {
  describe(`API front door [${d.name}]`, () => {
    let h: Harness
    let port: number
    let key: string
    let orgId: string
    beforeAll(async () => {
      h = await createHarness({ open: d.open })
      ;({ ownerKey: key, orgId } = await h.newOrg())
      await h.app.listen({ port: 0, host: '127.0.0.1' })
      port = (h.app.server.address() as AddressInfo).port
    })
    afterAll(() => h.close())

    const keyCount = async () => (await h.inject('GET', '/v1/api-keys', { token: key })).body.api_keys.length as number

    it('refuses NUL, lone surrogates (high, low, in a key) and deep nesting in a JSON body; stores nothing; the audit log keeps flowing', async () => {
      const before = await keyCount()
      const deep = `${'['.repeat(INPUT_LIMITS.maxDepth + 1)}${']'.repeat(INPUT_LIMITS.maxDepth + 1)}`
      const cases: Array<[string, string, string]> = [
        ['{"label":"a\\u0000b","permission_set":"read_only"}', 'label', 'NUL'],
        ['{"label":"a\\ud800b","permission_set":"read_only"}', 'label', 'surrogate'],
        ['{"label":"\\udfff","permission_set":"read_only"}', 'label', 'surrogate'],
        ['{"label":"ok","permission_set":"read_only","x\\ud83d":1}', 'body', 'key'],
        [`{"label":"ok","permission_set":"read_only","extra":${deep}}`, 'extra', 'deeper'],
        [`{"label":${'['.repeat(20_000)}${']'.repeat(20_000)}}`, 'label', 'deeper'],
      ]
      for (const [payload, field, problem] of cases) {
        const res = await h.inject('POST', '/v1/api-keys', { token: key, payload })
        expectEnvelope(res, 400, 'validation_error')
        const fields = res.body.error.details.fields as Record<string, string>
        const [name, message] = Object.entries(fields)[0]!
        expect(name.startsWith(field)).toBe(true)
        expect(message).toContain(problem)
      }
      expect(await keyCount()).toBe(before)
      // A well-formed pair (an emoji) is fine, and its audit row commits: the writer is not stuck.
      const ok = await h.inject('POST', '/v1/api-keys', { token: key, body: { label: 'ok \u{1F600}', permission_set: 'read_only' } })
      expect(ok.status).toBe(201)
      await h.audit.flush()
      const rows = await h.inject('GET', '/v1/audit?filter=event_type%3Dapi_key_created', { token: key })
      expect(rows.body.events.some((e: { detail?: { label?: string } }) => e.detail?.label === 'ok \u{1F600}')).toBe(true)
    })

    it('checks bodies of routes with their own JSON parser too (the signed webhook keeps its raw body)', async () => {
      const res = await h.inject('POST', '/v1/webhooks/identity/invite-accepted', { payload: '{"invitation_id":"inv_\\u0000","user_id":"\\ud800"}' })
      expectEnvelope(res, 400, 'validation_error')
    })

    it('refuses NUL in a query filter and in every kind of path id, before any route logic', async () => {
      for (const [method, url, field] of [
        ['GET', '/v1/audit?filter=workspace_id%3Da%00b', 'filter'],
        ['GET', '/v1/audit?filter=event_type%3D%ED%A0%80', undefined],
        ['DELETE', '/v1/api-keys/key_%00', 'id'],
        ['GET', `/v1/orgs/${orgId}%00/memberships`, 'id'],
        ['GET', '/v1/workspaces/ws_%00x', 'id'],
      ] as const) {
        const res = await h.inject(method, url, { token: key })
        expect(res.status, url).toBeLessThan(500)
        expect(res.body.error.code, url).toMatch(/validation_error|invalid_query/)
        if (field) expect(res.body.error.details.fields).toHaveProperty(field)
      }
    })

    it('renders fastify and Node parser errors in the envelope on a raw socket', async () => {
      const auth = `authorization: Bearer ${key}\r\n`
      const get = (target: string, extra = '') => `GET ${target} HTTP/1.1\r\nhost: x\r\n${auth}${extra}connection: close\r\n\r\n`
      const post = (type: string, body: string, length = Buffer.byteLength(body)) =>
        `POST /v1/api-keys HTTP/1.1\r\nhost: x\r\n${auth}content-type: ${type}\r\ncontent-length: ${length}\r\nconnection: close\r\n\r\n${body}`

      let res = await rawRequest(port, get('/v1/api-keys/%zz'))
      expectEnvelope(res, 400, 'validation_error')
      expect(res.body.error.details.fields).toHaveProperty('url')

      res = await rawRequest(port, get('/v1/api-keys', `x-big: ${'a'.repeat(20_000)}\r\n`))
      expectEnvelope(res, 431, 'headers_too_large')

      res = await rawRequest(port, '\x00\x01 not http at all\r\n\r\n')
      expectEnvelope(res, 400, 'validation_error')

      res = await rawRequest(port, `GET /v1/api-keys HTTP/1.1\r\nhost: x\r\ncontent-length: 1\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n`)
      expectEnvelope(res, 400, 'validation_error')

      res = await rawRequest(port, `PATCH /v1/api-keys HTTP/1.1\r\nhost: x\r\n${auth}connection: close\r\n\r\n`)
      expectEnvelope(res, 405, 'method_not_allowed')
      expect(res.headers.allow).toBe('GET, HEAD, POST')

      res = await rawRequest(port, `DELETE /v1/api-keys/${'k'.repeat(500)} HTTP/1.1\r\nhost: x\r\n${auth}connection: close\r\n\r\n`)
            expectEnvelope(res, 400, 'validation_error')
      expect(res.body.error.details.fields).toHaveProperty('path')

      res = await rawRequest(port, get(`/v1/nothing-here/${'n'.repeat(5_000)}`))
      expectEnvelope(res, 404, 'not_found')
      expect(res.body.error.message.length).toBeLessThan(400)

      res = await rawRequest(port, post('application/json', '{}', 2_000_000))
      expectEnvelope(res, 413, 'payload_too_large')

      res = await rawRequest(port, post('text/plain', '{"label":"x","permission_set":"read_only"}'))
      expectEnvelope(res, 415, 'unsupported_media_type')

      res = await rawRequest(port, post('application/json', '{"label":'))
      expectEnvelope(res, 400, 'validation_error')
      expect(res.body.error.details.fields).toEqual({ body: 'is not valid JSON' })

      // The server is still there and well.
      expect((await h.inject('GET', '/healthz')).status).toBe(200)
    })
  })
}
