// SNI passthrough is decided on the CONNECT target and the ClientHello's SNI, which must agree: a
// client that CONNECTs to a passthrough host and names another in its SNI (to reach a host the
// policy does not name through a tunnel the proxy does not read), or names none, gets a deny row
// and a closed connection, and the upstream never sees a handshake.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { onLoopback } from '../helpers/loopback-caps.js'
import { startHarness, type Harness } from '../proxy/harness.js'
import { startPinnedUpstream, tlsThrough } from '../proxy/passthrough-harness.js'

describe('passthrough: the SNI must name the CONNECT target', () => {
  let h: Harness
  let up: Awaited<ReturnType<typeof startPinnedUpstream>>
  let token = ''

  beforeAll(async () => {
    h = await startHarness()
    up = await startPinnedUpstream(h)
    token = (await h.workspace(onLoopback(`
- name: pinned
  type: http
  allow:
    - domains: ["localhost"]
      passthrough: true
`, up.port), 'idle', { raw: true })).token
  })
  afterAll(async () => {
    await up?.close()
    await h?.close()
  })

  for (const [what, sni, detail] of [
    ['an SNI that differs from the CONNECT target', 'internal.example', { sni: 'internal.example' }],
    ['a ClientHello without SNI', undefined, {}],
  ] as const) {
    it(`${what}: deny row, connection closed, no handshake upstream`, async () => {
      const before = h.audit.decisions().length
      const seen = up.connections
      await expect(tlsThrough(h, `localhost:${up.port}`, token, sni, up.caPem)).rejects.toThrow()
      const rows = (await h.audit.waitForDecisions(before + 1)).slice(before)
      expect(rows).toMatchObject([{ decision: 'deny', reason: 'no_match', method: 'CONNECT', destination: 'localhost', capability_name: 'pinned', detail: { passthrough: true, ...detail } }])
      expect(up.connections).toBe(seen)
    })
  }

  it('bytes that are not TLS: deny row, closed', async () => {
    const { openTunnel } = await import('../helpers/raw-socket.js')
    const before = h.audit.decisions().length
    const { socket } = await openTunnel(Number(new URL(h.proxyUrl).port), `localhost:${up.port}`, token)
    socket.write('GET / HTTP/1.1\r\nhost: localhost\r\n\r\n')
    await new Promise((r) => socket.once('close', r))
    const rows = (await h.audit.waitForDecisions(before + 1)).slice(before)
    expect(rows).toMatchObject([{ decision: 'deny', reason: 'no_match', detail: { passthrough: true } }])
  })
})
