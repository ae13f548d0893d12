// The proxy's shutdown (issue 14 §2): stop() refuses new connections, closes idle ones at once,
// lets requests in flight finish within limits.drainMs, then cuts the rest; every request has
// handed its one row to the sink when stop() resolves.
import type { IncomingMessage, ServerResponse } from 'node:http'
import { connect } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { openTunnel } from '../helpers/raw-socket.js'
import { startHarness, type Harness } from './harness.js'

const CAPS = `
- name: up
  type: http
  allow:
    - domains: ["127.0.0.1"]
      methods: [GET]
`

describe('ProxyService.stop drains within a bound', () => {
  let h: Harness | undefined
  afterEach(async () => {
    await h?.close()
    h = undefined
  })

  async function setup(drainMs: number): Promise<{ h: Harness; token: string; held: ServerResponse[]; port: number }> {
    h = await startHarness({ limits: { drainMs } })
    const { token } = await h.workspace(CAPS)
    const held: ServerResponse[] = []
    h.up.handler.current = (req: IncomingMessage, res: ServerResponse) => {
      if (req.url?.startsWith('/hold')) {
        res.writeHead(200)
        res.write('started ')
        held.push(res)
      } else res.end('ok')
    }
    // Activated, with an idle keep-alive tunnel left open by the harness's client.
    expect((await h.fetch(`https://127.0.0.1:${h.up.httpsPort}/warm`, { token })).status).toBe(200)
    return { h, token, held, port: Number(new URL(h.proxyUrl).port) }
  }

  it('a request in flight finishes; idle tunnels and new connections are closed; its row is written before stop resolves', async () => {
    const { h, token, held, port } = await setup(5_000)
    const idle = await openTunnel(port, `127.0.0.1:${h.up.httpsPort}`, token)
    const idleClosed = new Promise<void>((r) => idle.socket.once('close', () => r()))
    const res = await h.open(`https://127.0.0.1:${h.up.httpsPort}/hold-finish`, { token })
    const body = res.text()
    while (held.length < 1) await new Promise((r) => setTimeout(r, 10))
    const t0 = Date.now()
    const stopped = h.proxy.stop()
    await idleClosed
    const refused = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1')
      s.once('connect', () => s.destroy())
      s.once('error', () => resolve(true))
      s.once('close', () => resolve(true))
    })
    expect(refused).toBe(true)
    setTimeout(() => held[0]!.end('finished'), 200)
    expect(await body).toBe('started finished')
    await stopped
    expect(Date.now() - t0).toBeLessThan(5_000)
    const rows = h.audit.decisions().filter((r) => r.path === '/hold-finish')
    expect(rows).toMatchObject([{ decision: 'allow' }])
  })

  it('a request that outlives drainMs is cut at the deadline, and still has exactly one row', async () => {
    const { h, token, held } = await setup(300)
    const res = await h.open(`https://127.0.0.1:${h.up.httpsPort}/hold-forever`, { token })
    const body = res.text().then(() => 'completed', () => 'cut')
    while (held.length < 1) await new Promise((r) => setTimeout(r, 10))
    const t0 = Date.now()
    await h.proxy.stop()
    expect(Date.now() - t0).toBeLessThan(3_000)
    expect(await body).toBe('cut')
    expect(h.audit.decisions().filter((r) => r.path === '/hold-forever')).toHaveLength(1)
    for (const r of held) r.destroy()
  })
})
