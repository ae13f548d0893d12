// A decision row says what the upstream answered: an allowed request's row carries
// `detail.upstream_status` (when the upstream answered at all) and `detail.response_complete`, so
// a 404 or a 500 from the model, or a stream cut short, no longer reads as a plain allow with
// 0 tokens. Before, the row had neither. Shapes, inside a CONNECT tunnel and over plain HTTP:
// 200, 404, 500, a HEAD and a 204 that complete; an upstream that resets mid-body; an upstream
// that resets before answering; a client that leaves mid-stream.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { AuditEvent } from '../../src/contract/index.js'
import { startHarness, type Harness } from './harness.js'

const CAPS = `
- name: model
  type: http
  allow:
    - name: tls
      domains: ["127.0.0.1"]
      methods: [GET, HEAD]
    - name: plain
      domains: ["localhost"]
      methods: [GET, HEAD]
      allow_insecure: true
`

describe('the row carries the upstream status and whether the response completed', () => {
  let h: Harness
  let token = ''
  let before = 0
  const rows = async (n = 1): Promise<AuditEvent[]> => (await h.audit.waitForDecisions(before + n)).slice(before)

  beforeAll(async () => {
    h = await startHarness()
    token = (await h.workspace(CAPS)).token
    h.up.handler.current = (req, res) => {
      const path = req.url!.split('?')[0]!
      if (path === '/missing') return void res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not_found"}')
      if (path === '/broken') return void res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"overloaded"}')
      if (path === '/empty') return void res.writeHead(204).end()
      if (path === '/reset-mid-body') {
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '1000' })
        res.write('the first bytes of a long answer')
        setTimeout(() => res.socket?.destroy(), 20)
        return
      }
      if (path === '/reset-before-head') return void req.socket.destroy()
      if (path === '/stream') {
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        res.write('data: first\n\n')
        return // held open until the client leaves
      }
      res.end('ok')
    }
  })
  afterAll(async () => h.close())
  beforeEach(() => {
    before = h.audit.decisions().length
  })

  const bases = (): Array<[string, string]> => [
    ['inside a CONNECT tunnel', `https://127.0.0.1:${h.up.httpsPort}`],
    ['over plain HTTP', `http://localhost:${h.up.httpPort}`],
  ]

  for (const [where, i] of [['inside a CONNECT tunnel', 0], ['over plain HTTP', 1]] as const) {
    describe(where, () => {
      const base = (): string => bases()[i]![1]

      it('200, 404 and 500 that complete: allow rows with the status the agent got', async () => {
        for (const [path, status] of [['/ok', 200], ['/missing', 404], ['/broken', 500]] as const) {
          before = h.audit.decisions().length
          const res = await h.fetch(`${base()}${path}`, { token })
          expect(res.status).toBe(status)
          const [row] = await rows()
          expect(row).toMatchObject({ decision: 'allow', path, detail: { upstream_status: status, response_complete: true } })
          expect(row!.detail).not.toHaveProperty('upstream_error')
        }
      })

      it('a HEAD and a 204 (no body) complete', async () => {
        expect((await h.fetch(`${base()}/ok`, { token, method: 'HEAD' })).status).toBe(200)
        expect((await h.fetch(`${base()}/empty`, { token })).status).toBe(204)
        const r = await rows(2)
        expect(r.map((x) => [x.method, x.detail?.upstream_status, x.detail?.response_complete])).toEqual([['HEAD', 200, true], ['GET', 204, true]])
      })

      it('an upstream that resets mid-body: the status it sent, not complete, and why', async () => {
        const res = await h.fetch(`${base()}/reset-mid-body`, { token }).catch((err: Error) => err)
        // The agent never gets a body that looks complete: the fetch fails or the body is short.
        if (!(res instanceof Error)) expect(Buffer.byteLength(res.body)).toBeLessThan(1000)
        const [row] = await rows()
        expect(row).toMatchObject({ decision: 'allow', detail: { upstream_status: 200, response_complete: false, upstream_error: 'connection_reset' } })
      })

      it('an upstream that resets before answering: no status, not complete, 502 to the agent', async () => {
        const res = await h.fetch(`${base()}/reset-before-head`, { token })
        expect(res.status).toBe(502)
        const [row] = await rows()
        expect(row).toMatchObject({ decision: 'allow', detail: { response_complete: false, upstream_error: expect.any(String) } })
        expect(row!.detail).not.toHaveProperty('upstream_status')
      })

      it('a client that leaves mid-stream: the status, not complete, client_closed', async () => {
        const ac = new AbortController()
        const res = await h.open(`${base()}/stream`, { token, signal: ac.signal } as never)
        expect(res.status).toBe(200)
        await res.body!.getReader().read()
        ac.abort()
        const [row] = await rows()
        expect(row).toMatchObject({ decision: 'allow', detail: { upstream_status: 200, response_complete: false, client_closed: true } })
      })
    })
  }
})
