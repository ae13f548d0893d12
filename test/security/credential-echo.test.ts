// Attack catalogue, credential echo (issue 15 class 8): an upstream that reflects its request
// must not hand the agent the bytes the proxy injected — credentials in every placement and the
// values of secrets[...] used by transforms — in headers or body, split across chunks, or
// compressed; and secret-bearing transforms apply only when Host is the CONNECT target.
import { join } from 'node:path'
import { gzipSync } from 'node:zlib'
import type { IncomingMessage } from 'node:http'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { AuditEvent } from '../../src/contract/index.js'
import { isStaticAuthProvider } from '../../src/policy/index.js'
import { OrgMaterialAdmin, Sealer, loadMasterKey } from '../../src/secrets/index.js'
import { startHarness, type Harness } from '../proxy/harness.js'
import { connectRequest } from './raw.js'

const CAPS = `
- name: apis
  type: http
  allow:
    - name: gh
      domains: ["127.0.0.1"]
      methods: [GET]
      paths: ["/gh/**"]
    - name: maps
      domains: ["127.0.0.1"]
      methods: [GET]
      paths: ["/maps/**"]
    - name: jira
      domains: ["127.0.0.1"]
      methods: [GET]
      paths: ["/jira/**"]
    - name: plain
      domains: ["127.0.0.1"]
      methods: [GET]
      paths: ["/plain/**"]
  transforms:
    - name: key-header
      applies_to: [gh]
      header: { name: x-api-key, action: set, value: '"key " + secrets["api_key"]' }
    - name: gh-auth
      applies_to: [gh]
      auth: { credential: github-bot, provider: github }
    - name: maps-auth
      applies_to: [maps]
      auth: { credential: maps-key, provider: google-maps }
    - name: jira-auth
      applies_to: [jira]
      auth: { credential: jira-user, provider: jira }
`

const SECRET = 'sk-secret-value-123'
const GH = 'ghp_tokenvalue456'
const MAPS = 'maps+key/with=chars'
const JIRA_PASS = 'jira-pass-789'

describe('credentials never come back', () => {
  let h: Harness
  let token = ''
  let before = 0
  let last: IncomingMessage | undefined
  const rows = async (n = 1): Promise<AuditEvent[]> => (await h.audit.waitForDecisions(before + n)).slice(before)
  const get = (target: string, host?: string) =>
    connectRequest({ proxyPort: Number(new URL(h.proxyUrl).port), authority: `127.0.0.1:${h.up.httpsPort}`, token, caPem: h.proxy.ca.certPem, target, ...(host ? { host } : {}) })
  const dump = (req: IncomingMessage) => JSON.stringify({ url: req.url, headers: req.headers })
  const leaks = (s: string) => [SECRET, GH, MAPS, encodeURIComponent(MAPS), JIRA_PASS, Buffer.from(`bot@example.com:${JIRA_PASS}`).toString('base64')].filter((x) => s.includes(x))

  beforeAll(async () => {
    h = await startHarness()
    const admin = new OrgMaterialAdmin(h.store, new Sealer(await loadMasterKey(join(h.dir, 'data'))), h.audit, isStaticAuthProvider)
    const actor = { orgId: h.orgId, userId: h.userId }
    await admin.setSecret(actor, 'api_key', SECRET)
    await admin.createCredential(actor, { name: 'github-bot', provider: 'github', kind: 'static_token', token: GH })
    await admin.createCredential(actor, { name: 'maps-key', provider: 'google-maps', kind: 'query_key', token: MAPS })
    await admin.createCredential(actor, { name: 'jira-user', provider: 'jira', kind: 'basic_auth', username: 'bot@example.com', password: JIRA_PASS })
    token = (await h.workspace(CAPS)).token
  })
  afterAll(async () => h.close())
  beforeEach(() => {
    before = h.audit.decisions().length
    last = undefined
    h.up.handler.current = (req, res) => {
      last = req
      res.setHeader('x-echo', dump(req))
      res.setHeader('set-cookie', [`a=${req.headers.authorization ?? ''}`, 'b=plain'])
      res.end(dump(req))
    }
  })

  it('header credential and secret header transform: injected upstream, masked in the echoed headers and body', async () => {
    const res = await get('/gh/repos')
    expect(res.status).toBe(200)
    expect(last!.headers.authorization).toBe(`Bearer ${GH}`)
    expect(last!.headers['x-api-key']).toBe(`key ${SECRET}`)
    expect(leaks(JSON.stringify(res))).toEqual([])
    expect(res.body).toContain('"authorization":"**') // the shape survives, the bytes do not
    expect(res.headers['content-length']).toBeUndefined() // a mask is not as long as what it hides
    const [row] = await rows()
    expect(row!.detail).toMatchObject({ scrubbed: expect.any(Number) })
    expect((row!.detail as { scrubbed: number }).scrubbed).toBeGreaterThanOrEqual(4)
  })

  it('query-key placement: the raw and URL-encoded key are masked in a reflected URL', async () => {
    h.up.handler.current = (req, res) => {
      last = req
      res.setHeader('location', `https://elsewhere.example${req.url}`)
      res.end(`${req.url} ${decodeURIComponent(req.url!)}`)
    }
    const res = await get('/maps/geo?q=1')
    expect(new URL(`http://x${last!.url}`).searchParams.get('key')).toBe(MAPS)
    expect(leaks(JSON.stringify(res))).toEqual([])
  })

  it('basic placement: the encoded pair and the password in clear are masked', async () => {
    h.up.handler.current = (req, res) => {
      last = req
      const pair = Buffer.from(String(req.headers.authorization).slice(6), 'base64').toString()
      res.end(`${req.headers.authorization} ${pair}`)
    }
    const res = await get('/jira/issue')
    expect(last!.headers.authorization).toMatch(/^Basic /)
    expect(res.body).toContain('bot@example.com:')
    expect(leaks(res.body)).toEqual([])
  })

  it('a secret split across chunk boundaries (one byte per write) is still masked', async () => {
    h.up.handler.current = async (req, res) => {
      last = req
      res.setHeader('content-type', 'text/plain')
      const text = `token=${GH};key=${SECRET};`
      for (const ch of text) {
        res.write(ch)
        await new Promise((r) => setTimeout(r, 2))
      }
      res.end()
    }
    const res = await get('/gh/slow')
    expect(res.body).toBe('token=********;key=********;')
  })

  it('compression cannot hide an echo: identity is requested, and a gzip body anyway is decoded and masked', async () => {
    h.up.handler.current = (req, res) => {
      last = req
      res.setHeader('content-encoding', 'gzip')
      res.end(gzipSync(dump(req)))
    }
    const res = await get('/gh/zip')
    expect(last!.headers['accept-encoding']).toBe('identity')
    expect(res.headers['content-encoding']).toBeUndefined()
    expect(res.body).toContain('"url":"/gh/zip"')
    expect(leaks(res.body)).toEqual([])
  })

  it('a body in an encoding the proxy cannot read is refused (502), never passed unscanned', async () => {
    h.up.handler.current = (req, res) => {
      last = req
      res.setHeader('content-encoding', 'zstd')
      res.end(dump(req))
    }
    const res = await get('/gh/zstd')
    expect(res.status).toBe(502)
    expect(leaks(JSON.stringify(res))).toEqual([])
    const [row] = await rows()
    expect(row!.detail).toMatchObject({ unscrubbable_encoding: 'zstd' })
  })

  it('a secret-bearing header transform is withheld when Host is not the CONNECT target (auth_unavailable)', async () => {
    const res = await get('/gh/repos', 'evil.example')
    expect(res.status).toBe(200)
    expect(last!.headers['x-api-key']).toBeUndefined()
    expect(last!.headers.authorization).toBeUndefined()
    expect(leaks(JSON.stringify(res))).toEqual([])
    const [row] = await rows()
    expect(row!.transforms_failed).toMatchObject({ 'key-header': 'auth_unavailable', 'gh-auth': 'auth_unavailable' })
  })

  it('an upstream that dies mid-body under the scan cuts the agent short: never a body that looks complete', async () => {
    h.up.handler.current = (req, res) => {
      last = req
      res.writeHead(200, { 'content-length': '1000', 'content-type': 'text/plain' })
      res.write(`token=${GH};`)
      setTimeout(() => res.socket?.destroy(), 20)
    }
    const res = await get('/gh/cut')
    expect(Buffer.byteLength(res.body)).toBeLessThan(1000)
    expect(leaks(res.body)).toEqual([])
    const [row] = await rows()
    expect(row!.detail).toMatchObject({ upstream_error: expect.any(String) })
  })

  it('nothing injected, nothing touched: the response is relayed as sent (compressed, no scan)', async () => {
    const gz = gzipSync('not a secret of this request')
    h.up.handler.current = (_req, res) => {
      res.setHeader('content-encoding', 'gzip')
      res.end(gz)
    }
    const res = await get('/plain/x')
    expect(res.status).toBe(200)
    expect(res.headers['content-encoding']).toBe('gzip')
    expect(Buffer.from(res.body, 'latin1').equals(gz)).toBe(true)
    const [row] = await rows()
    expect(row!.detail ?? {}).not.toHaveProperty('scrubbed')
  })
})
