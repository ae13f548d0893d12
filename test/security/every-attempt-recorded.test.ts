// Attack (issue 15 class 9): requests the proxy refuses to carry still get a deny with a reason
// and exactly one row. Before: a CONNECT inside an intercepted tunnel was closed with no row.
// Shapes: CONNECT inside a tunnel (with and without a token, to a name and to an IP literal),
// TRACE (it would echo injected credentials back) inside a tunnel and over plain HTTP.
import type { IncomingMessage, ServerResponse } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PLATFORM_ORG } from '../../src/contract/index.js'
import { exchangeOn, openTunnel, rawExchange, tlsOver } from '../helpers/raw-socket.js'
import { startHarness, type Harness } from '../proxy/harness.js'

const CAPS = `
- name: any
  type: http
  allow:
    - domains: ["127.0.0.1"]
    - domains: ["localhost"]
      allow_insecure: true
`

describe('every attempt is recorded', () => {
  let h: Harness
  let port: number
  let token: string
  let workspaceId: string
  const seen: string[] = []

  beforeAll(async () => {
    h = await startHarness()
    port = Number(new URL(h.proxyUrl).port)
    ;({ token, workspaceId } = await h.workspace(CAPS))
    h.up.handler.current = (req: IncomingMessage, res: ServerResponse) => {
      seen.push(`${req.method} ${req.url}`)
      res.end('ok')
    }
  })
  afterAll(async () => {
    await h.close()
  })

  const inTunnel = async (bytes: string, withToken = true): Promise<{ status: string; text: string }> => {
    // Without a valid token: a token that fails verification (a CONNECT with none at all is answered 407).
    const { socket } = await openTunnel(port, `127.0.0.1:${h.up.httpsPort}`, withToken ? token : 'not-a-token')
    const tls = await tlsOver(socket, '127.0.0.1', h.proxy.ca.certPem)
    return exchangeOn(tls, [bytes])
  }

  for (const target of ['evil.example:443', '10.0.0.1:22', '[::1]:7070']) {
    it(`CONNECT ${target} inside a tunnel: 403 no_match and one row for the tunnel's workspace`, async () => {
      const before = h.audit.decisions().length
      const res = await inTunnel(`CONNECT ${target} HTTP/1.1\r\nhost: ${target}\r\n\r\n`)
      expect(res.status).toMatch(/^HTTP\/1\.1 403 /)
      expect(res.text).toContain('x-corral-deny-reason: no_match')
      const rows = h.audit.decisions().slice(before)
      expect(rows).toHaveLength(1)
      expect(rows[0]).toMatchObject({ org_id: h.orgId, workspace_id: workspaceId, method: 'CONNECT', decision: 'deny', reason: 'no_match', destination: '127.0.0.1' })
    })
  }

  it('CONNECT inside a tunnel opened without a token: the row is in the platform scope', async () => {
    const before = h.audit.decisions().length
    const res = await inTunnel('CONNECT evil.example:443 HTTP/1.1\r\nhost: evil.example:443\r\n\r\n', false)
    expect(res.status).toMatch(/^HTTP\/1\.1 403 /)
    expect(h.audit.decisions().slice(before)).toMatchObject([{ org_id: PLATFORM_ORG, user_id: 'system', method: 'CONNECT', reason: 'no_match' }])
  })

  // (TRACK is not a method Node's parser accepts: a 400 transport row, like other garbage.)
  for (const method of ['TRACE']) {
    it(`${method} inside a tunnel and over plain HTTP: 403 no_match, one row each, never forwarded`, async () => {
      const before = h.audit.decisions().length
      const tunnelled = await inTunnel(`${method} /echo HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n`)
      expect(tunnelled.status).toMatch(/^HTTP\/1\.1 403 /)
      const plain = await rawExchange(port, [`${method} http://localhost:${h.up.httpPort}/echo HTTP/1.1\r\nhost: localhost\r\nproxy-authorization: Bearer ${token}\r\nconnection: close\r\n\r\n`])
      expect(plain.status).toMatch(/^HTTP\/1\.1 403 /)
      const rows = h.audit.decisions().slice(before)
      expect(rows.map((r) => [r.method, r.reason, r.org_id])).toEqual([[method, 'no_match', h.orgId], [method, 'no_match', h.orgId]])
      expect(seen.filter((s) => s.startsWith(method))).toEqual([])
    })
  }
})
