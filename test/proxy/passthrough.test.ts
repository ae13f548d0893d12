// SNI passthrough for certificate-pinned clients: a `passthrough: true` rule's host is not
// intercepted. The client's TLS reaches the upstream as sent (it verifies the upstream's own
// certificate, which the corral CA did not sign), bytes are spliced both ways, and the tunnel has
// one row with its capability, SNI, bytes each way and duration. Hosts without such a rule are
// intercepted as before. `caps lint` refuses what a passthrough rule cannot enforce.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { AuditEvent } from '../../src/contract/index.js'
import { compilePolicy } from '../../src/policy/index.js'
import { onLoopback } from '../helpers/loopback-caps.js'
import { startHarness, type Harness } from './harness.js'
import { httpOver, startPinnedUpstream, tlsThrough } from './passthrough-harness.js'

const CAPS = `
- name: pinned
  type: http
  allow:
    - name: pinned-client
      domains: ["localhost"]
      passthrough: true
`

describe('SNI passthrough', () => {
  let h: Harness
  let up: Awaited<ReturnType<typeof startPinnedUpstream>>
  let token = ''
  let before = 0
  const rows = async (n = 1): Promise<AuditEvent[]> => (await h.audit.waitForDecisions(before + n)).slice(before)

  beforeAll(async () => {
    h = await startHarness()
    up = await startPinnedUpstream(h)
    token = (await h.workspace(onLoopback(CAPS, up.port), 'idle', { raw: true })).token
  })
  afterAll(async () => {
    await up?.close()
    await h?.close()
  })
  beforeEach(() => {
    before = h.audit.decisions().length
  })

  it("a pinned client's TLS reaches the upstream unread; one allow row with SNI, bytes each way and duration", async () => {
    const t = await tlsThrough(h, `localhost:${up.port}`, token, 'localhost', up.caPem)
    // The client trusts only the upstream's CA, and its handshake verified: the certificate is the
    // upstream's own, never one the corral CA minted.
    expect(t.authorized).toBe(true)
    const answer = await httpOver(t, '/pinned')
    expect(answer).toMatch(/^HTTP\/1\.1 200/)
    expect(answer).toContain('pinned upstream: /pinned')
    const [row] = await rows()
    expect(row).toMatchObject({ decision: 'allow', method: 'CONNECT', destination: 'localhost', capability_name: 'pinned', detail: { passthrough: true, sni: 'localhost', response_complete: true } })
    const d = row!.detail as Record<string, number>
    expect(d.bytes_up).toBeGreaterThan(100)
    expect(d.bytes_down).toBeGreaterThan(100)
    expect(typeof d.duration_ms).toBe('number')
  })

  it('a host without a passthrough rule is intercepted (the corral CA signs what the client sees)', async () => {
    const ws = await h.workspace(onLoopback(`
- name: api
  type: http
  allow:
    - domains: ["localhost"]
      methods: [GET]
`, up.port), 'idle', { raw: true })
    // Trusting only the corral CA, the handshake verifies: the proxy minted the leaf.
    const t = await tlsThrough(h, `localhost:${up.port}`, ws.token, 'localhost', h.proxy.ca.certPem)
    expect(t.authorized).toBe(true)
    t.destroy()
    // Trusting only the upstream's CA, the intercepted tunnel fails its handshake.
    await expect(tlsThrough(h, `localhost:${up.port}`, ws.token, 'localhost', up.caPem)).rejects.toThrow()
  })

  describe('caps lint refuses what a passthrough rule cannot enforce', () => {
    for (const [what, extra, cap] of [
      ['methods', '      methods: [GET]\n', ''],
      ['paths', '      paths: [/v1/**]\n', ''],
      ['a match expression', "      match:\n        expr: 'true'\n", ''],
      ['request_schema', '      request_schema: {type: object}\n', ''],
      ['a header transform', '', '  transforms:\n    - header: {name: x-a, action: set, value: \'"b"\'}\n'],
      ['credentials', '', '  transforms:\n    - auth: {credential: gh, provider: github}\n'],
    ] as const) {
      it(`passthrough with ${what}: passthrough_conflict`, () => {
        const out = compilePolicy(`- name: pinned\n  type: http\n  allow:\n    - domains: [pinned.example.com]\n      passthrough: true\n${extra}${cap}`)
        expect(out.ok).toBe(false)
        expect(out.diagnostics.map((d) => d.code)).toContain('passthrough_conflict')
      })
    }
    it('passthrough with domains (and allow_private) only compiles, and admits no intercepted request', () => {
      const out = compilePolicy('- name: pinned\n  type: http\n  allow:\n    - domains: [pinned.example.com]\n      passthrough: true\n      allow_private: ["10.0.0.0/8"]\n')
      expect(out.ok).toBe(true)
      if (!out.ok) return
      expect(out.policy.passthrough('pinned.example.com')).toMatchObject({ capability: 'pinned' })
      expect(out.policy.passthrough('pinned.example.com:8443')).toBeUndefined()
      expect(out.policy.admit({ method: 'GET', scheme: 'https', host: 'pinned.example.com', path: '/', rawQuery: '', headers: {} }, {}).decision).toBe('deny')
    })
  })
})
