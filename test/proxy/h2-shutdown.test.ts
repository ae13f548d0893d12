// Shutdown with HTTP/2 tunnels open: every session gets GOAWAY (no new stream is accepted), a
// stream in flight finishes within the drain, and its row is written.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { onLoopback } from '../helpers/loopback-caps.js'
import { startHarness, type Harness } from './harness.js'
import { h2Request, h2Through, startH2Upstream, type H2Upstream } from './h2-harness.js'

describe('HTTP/2 at shutdown', () => {
  let h: Harness
  let up: H2Upstream
  const held: Array<() => void> = []

  beforeAll(async () => {
    h = await startHarness({ limits: { drainMs: 5_000 } })
    up = await startH2Upstream(h)
    up.handler.current = (_req, res) => {
      res.writeHead(200)
      res.write('started ')
      held.push(() => res.end('finished'))
    }
  })
  afterAll(async () => {
    await up?.close()
    await h?.close()
  })

  it('GOAWAY to the client; the stream in flight completes and keeps its row', async () => {
    const { token } = await h.workspace(onLoopback(`
- name: api
  type: http
  allow:
    - domains: ["127.0.0.1"]
      methods: [GET]
`, up.port), 'idle', { raw: true })
    const s = await h2Through(h, `127.0.0.1:${up.port}`, token)
    const goaway = new Promise<void>((r) => s.once('goaway', () => r()))
    const inFlight = h2Request(s, { ':path': '/long' })
    while (held.length < 1) await new Promise((r) => setTimeout(r, 10))
    const before = h.audit.decisions().length
    const stopping = h.proxy.stop()
    await goaway
    held.shift()!()
    const res = await inFlight
    expect(res.status).toBe(200)
    expect(res.body).toBe('started finished')
    await stopping
    const rows = h.audit.decisions().slice(before)
    expect(rows).toMatchObject([{ decision: 'allow', path: '/long', detail: { protocol: 'h2', response_complete: true } }])
  })
})
