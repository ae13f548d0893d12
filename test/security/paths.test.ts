// Attack catalogue, paths (issue 15 class 3): dot segments, their encodings and server-specific
// spellings must not get past a `paths` glob, and what the upstream receives is the path that was
// matched. The upstream here records the request target it got, as a normalizing server would act on it.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { startHarness, type Harness } from '../proxy/harness.js'
import { connectRequest, plainRequest } from './raw.js'

const CAPS = `
- name: files
  type: http
  allow:
    - name: public
      domains: ["127.0.0.1", "localhost"]
      methods: [GET]
      allow_insecure: true
      paths: ["/public/**"]
    - name: cel
      domains: ["127.0.0.1"]
      methods: [GET]
      match:
        expr: request.path == "/cel/ok"
`

describe('one canonical path', () => {
  let h: Harness
  let token = ''
  const seen: string[] = []
  let before = 0

  beforeAll(async () => {
    h = await startHarness()
    h.up.handler.current = (req, res) => {
      seen.push(req.url ?? '')
      res.end('upstream')
    }
    token = (await h.workspace(CAPS)).token
  })
  afterAll(async () => h.close())
  beforeEach(() => {
    seen.length = 0
    before = h.audit.decisions().length
  })

  const proxyPort = (): number => Number(new URL(h.proxyUrl).port)
  const tunneled = (target: string) =>
    connectRequest({ proxyPort: proxyPort(), authority: `127.0.0.1:${h.up.httpsPort}`, token, caPem: h.proxy.ca.certPem, target })

  it('dot segments are resolved before matching: /public/../private is /private (no_match), never forwarded', async () => {
    for (const target of ['/public/../private', '/public/a/../../private', '/public//../private', '/public/./../private']) {
      const res = await tunneled(target)
      expect(res.headers['x-corral-deny-reason'], target).toBe('no_match')
    }
    expect(seen).toEqual([])
    const rows = (await h.audit.waitForDecisions(before + 4)).slice(before)
    expect(rows.map((r) => r.path)).toEqual(['/private', '/private', '/private', '/private'])
  })

  it('ambiguous spellings are refused path_ambiguous: encoded dots, encoded or raw slashes and backslashes, ..;, climbing above /, bad escapes, NUL', async () => {
    const targets = [
      '/public/%2e%2e/private', '/public/%2E%2E/private', '/public/.%2e/private', '/public/%2e/x',
      '/public/..%2fprivate', '/public/%2F..%2Fprivate', '/public/..%5cprivate', '/public/..\\private',
      '/public/..;/private', '/public/.;x/y', '/public/%2e%2e;/private',
      '/..', '/public/../../etc/passwd', '/public/%zz', '/public/%4', '/public/a%00.txt', '/public/a#/../../private',
    ]
    for (const target of targets) {
      const res = await tunneled(target)
      expect(res.headers['x-corral-deny-reason'], target).toBe('path_ambiguous')
    }
    expect(seen).toEqual([])
    const rows = (await h.audit.waitForDecisions(before + targets.length)).slice(before)
    expect(rows.every((r) => r.reason === 'path_ambiguous')).toBe(true)
  })

  it('what is forwarded is what was matched: the canonical path with the query as sent', async () => {
    const res = await tunneled('/public/./a//b/%7Euser/%41%3a/?x=%2e%2e&y=/../')
    expect(res.status).toBe(200)
    expect(seen).toEqual(['/public/a/b/~user/A%3A/?x=%2e%2e&y=/../'])
  })

  it('absolute-form targets inside a tunnel and plain HTTP get the same treatment', async () => {
    const a = await tunneled(`https://127.0.0.1:${h.up.httpsPort}/public/../private`)
    expect(a.headers['x-corral-deny-reason']).toBe('no_match')
    const b = await plainRequest({ proxyPort: proxyPort(), target: `http://localhost:${h.up.httpPort}/public/%2e%2e/private`, token })
    expect(b.headers['x-corral-deny-reason']).toBe('path_ambiguous')
    const c = await plainRequest({ proxyPort: proxyPort(), target: `http://localhost:${h.up.httpPort}/public/x/../y`, token })
    expect(c.status).toBe(200)
    expect(seen).toEqual(['/public/y'])
  })

  it('CEL sees the canonical path', async () => {
    const res = await tunneled('/cel/./x/../ok')
    expect(res.status).toBe(200)
    expect(seen).toEqual(['/cel/ok'])
  })
})
