// Attack catalogue, destinations (issue 15 classes 1 and 2): ports a pattern does not name, and
// names or literals that land on loopback, private ranges or serve's own listeners. Real sockets
// through the proxy; every case asserts the upstream saw nothing and the one decision row.
import { lookup } from 'node:dns/promises'
import type { LookupAddress } from 'node:dns'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { AuditEvent } from '../../src/contract/index.js'
import { startHarness, type Harness } from '../proxy/harness.js'
import { connectRequest, plainRequest } from './raw.js'

const LOOPBACK = '["127.0.0.0/8", "::1"]'

describe('destinations: ports and addresses', () => {
  let h: Harness
  let hits = 0
  let before = 0
  /** Answers of the test resolver, per name; other names go to the system resolver. */
  const answers = new Map<string, () => LookupAddress[]>()
  let lookups = 0
  /** An extra listener treated as serve's own (stands for the API or the database). */
  let ownPort = 0

  beforeAll(async () => {
    h = await startHarness({
      resolve: async (name) => {
        lookups++
        const a = answers.get(name)
        return a ? a() : lookup(name, { all: true })
      },
      ownEndpoints: () => (ownPort ? [{ host: '0.0.0.0', port: ownPort }] : []),
    })
    h.up.handler.current = (_req, res) => {
      hits++
      res.end('upstream')
    }
  })
  afterAll(async () => h.close())
  beforeEach(() => {
    before = h.audit.decisions().length
    hits = 0
  })

  const rows = async (n = 1): Promise<AuditEvent[]> => (await h.audit.waitForDecisions(before + n)).slice(before)
  const port = (): number => Number(new URL(h.proxyUrl).port)
  const ws = (caps: string) => h.workspace(caps, 'idle', { raw: true })
  const rule = (domains: string, extra = '') => `
- name: net
  type: http
  allow:
    - domains: ${domains}
      methods: [GET]
${extra}`

  describe('ports', () => {
    it('a pattern without a port does not admit CONNECT to another port (localhost, 127.0.0.1)', async () => {
      const { token } = await ws(rule('["localhost", "127.0.0.1"]', `      allow_private: ${LOOPBACK}\n`))
      for (const authority of [`localhost:${h.up.httpsPort}`, `127.0.0.1:${h.up.httpsPort}`]) {
        const res = await connectRequest({ proxyPort: port(), authority, token, caPem: h.proxy.ca.certPem, target: '/x' })
        expect(res.status).toBe(403)
        expect(res.headers['x-corral-deny-reason']).toBe('no_match')
      }
      expect(hits).toBe(0)
      expect((await rows(2)).map((r) => r.reason)).toEqual(['no_match', 'no_match'])
    })

    it('an allow_insecure rule for a name does not admit http://name:<any port>', async () => {
      const { token } = await ws(rule('["localhost"]', `      allow_insecure: true\n      allow_private: ${LOOPBACK}\n`))
      const res = await plainRequest({ proxyPort: port(), target: `http://localhost:${h.up.httpPort}/v1/admin`, token })
      expect(res.status).toBe(403)
      expect(res.headers['x-corral-deny-reason']).toBe('no_match')
      expect(hits).toBe(0)
    })

    it('a pattern with a port matches exactly that port (https and http), and no other', async () => {
      const { token } = await ws(rule(`["127.0.0.1:${h.up.httpsPort}", "localhost:${h.up.httpPort}"]`, `      allow_insecure: true\n      allow_private: ${LOOPBACK}\n`))
      const ok = await connectRequest({ proxyPort: port(), authority: `127.0.0.1:${h.up.httpsPort}`, token, caPem: h.proxy.ca.certPem, target: '/x' })
      expect(ok.status).toBe(200)
      const plain = await plainRequest({ proxyPort: port(), target: `http://localhost:${h.up.httpPort}/x`, token })
      expect(plain.status).toBe(200)
      const other = await plainRequest({ proxyPort: port(), target: `http://localhost:${h.up.httpsPort}/x`, token })
      expect(other.headers['x-corral-deny-reason']).toBe('no_match')
      expect(hits).toBe(2)
    })
  })

  describe('addresses', () => {
    it('loopback is refused destination_private unless the rule names the range; the row names the address, the agent does not see it', async () => {
      const { token } = await ws(rule(`["127.0.0.1:${h.up.httpsPort}"]`))
      const res = await connectRequest({ proxyPort: port(), authority: `127.0.0.1:${h.up.httpsPort}`, token, caPem: h.proxy.ca.certPem, target: '/x' })
      expect(res.status).toBe(403)
      expect(res.headers['x-corral-deny-reason']).toBe('destination_private')
      expect(res.body).not.toContain('127.0.0.1')
      const [row] = await rows()
      expect(row!.reason).toBe('destination_private')
      expect(row!.detail).toMatchObject({ address: '127.0.0.1' })
      expect(hits).toBe(0)
    })

    it('a range other than the address connected to does not allow it', async () => {
      const { token } = await ws(rule(`["127.0.0.1:${h.up.httpsPort}"]`, '      allow_private: ["10.0.0.0/8", "127.0.0.2"]\n'))
      const res = await connectRequest({ proxyPort: port(), authority: `127.0.0.1:${h.up.httpsPort}`, token, caPem: h.proxy.ca.certPem, target: '/x' })
      expect(res.headers['x-corral-deny-reason']).toBe('destination_private')
      expect(hits).toBe(0)
    })

    it('literal forms of loopback are one address: decimal, octal, hex, short, IPv4-mapped IPv6, [::1]', async () => {
      // "**" admitted every port on the old code; "**:<port>" reaches the address check now.
      const { token } = await ws(rule(`["**", "**:${h.up.httpsPort}"]`))
      const forms = ['2130706433', '017700000001', '0x7f.1', '0x7f000001', '127.1', '[::ffff:127.0.0.1]', '[::ffff:7f00:1]', '[::1]', '[0:0:0:0:0:0:0:1]']
      for (const f of forms) {
        const res = await connectRequest({ proxyPort: port(), authority: `${f}:${h.up.httpsPort}`, token, caPem: h.proxy.ca.certPem, target: '/x' })
        expect([403, 400], f).toContain(res.status)
        if (!f.startsWith('[')) expect(res.headers['x-corral-deny-reason'], f).toBe('destination_private')
        else if (res.status === 403) expect(['destination_private', 'no_match'], f).toContain(res.headers['x-corral-deny-reason'])
      }
      expect(hits).toBe(0)
    })

    it('plain HTTP literal forms and a name resolving to loopback are refused', async () => {
      const { token } = await ws(rule(`["127.0.0.1:${h.up.httpPort}", "localhost:${h.up.httpPort}"]`, '      allow_insecure: true\n'))
      for (const host of ['2130706433', '0x7f.0.0.1', '127.1', 'localhost']) {
        const res = await plainRequest({ proxyPort: port(), target: `http://${host}:${h.up.httpPort}/x`, token })
        expect(res.headers['x-corral-deny-reason'], host).toBe('destination_private')
      }
      expect(hits).toBe(0)
    })

    it('DNS rebinding: each connection resolves again and every answer is checked (alternating and mixed answers)', async () => {
      let n = 0
      answers.set('rebind.test', () => [{ address: n++ % 2 === 0 ? '127.0.0.1' : '10.1.2.3', family: 4 }])
      answers.set('mixed.test', () => [{ address: '198.51.100.7', family: 4 }, { address: '127.0.0.1', family: 4 }].reverse())
      answers.set('mapped.test', () => [{ address: '::ffff:127.0.0.1', family: 6 }])
      answers.set('cgnat.test', () => [{ address: '100.64.1.1', family: 4 }])
      answers.set('ula.test', () => [{ address: 'fd12::1', family: 6 }])
      answers.set('linklocal.test', () => [{ address: '169.254.169.254', family: 4 }])
      const names = ['rebind.test', 'mixed.test', 'mapped.test', 'cgnat.test', 'ula.test', 'linklocal.test']
      const { token } = await ws(rule(`[${names.map((x) => `"${x}:${h.up.httpsPort}"`).join(', ')}]`))
      const start = lookups
      for (const name of [...names, 'rebind.test', 'rebind.test']) {
        const res = await connectRequest({ proxyPort: port(), authority: `${name}:${h.up.httpsPort}`, token, caPem: h.proxy.ca.certPem, target: '/x', sni: name })
        expect(res.headers['x-corral-deny-reason'], name).toBe('destination_private')
      }
      expect(lookups - start).toBe(names.length + 2)
      expect(hits).toBe(0)
    })

    it('a pooled connection opened under allow_private is not reused by a rule without it', async () => {
      const allowed = await ws(rule(`["127.0.0.1:${h.up.httpsPort}"]`, `      allow_private: ${LOOPBACK}\n`))
      const plain = await ws(rule(`["127.0.0.1:${h.up.httpsPort}"]`))
      const a = await h.fetch(`https://127.0.0.1:${h.up.httpsPort}/a`, { token: allowed.token })
      expect(a.status).toBe(200)
      const b = await h.fetch(`https://127.0.0.1:${h.up.httpsPort}/b`, { token: plain.token })
      expect(b.status).toBe(403)
      expect(b.headers.get('x-corral-deny-reason')).toBe('destination_private')
      expect(hits).toBe(1)
    })
  })

  describe("serve's own listeners", () => {
    it('the proxy port and the other listeners are refused even when the rule names loopback', async () => {
      ownPort = h.up.httpPort // stands for the API port, bound on 0.0.0.0
      try {
        const { token } = await ws(rule(`["127.0.0.1:${port()}", "localhost:${h.up.httpPort}", "127.0.0.1:${h.up.httpPort}"]`, `      allow_insecure: true\n      allow_private: ["0.0.0.0/0", "::/0"]\n`))
        const self = await connectRequest({ proxyPort: port(), authority: `127.0.0.1:${port()}`, token, caPem: h.proxy.ca.certPem, target: '/x' })
        expect(self.headers['x-corral-deny-reason']).toBe('destination_private')
        for (const host of ['127.0.0.1', 'localhost', '127.0.0.9', '0.0.0.0']) {
          const res = await plainRequest({ proxyPort: port(), target: `http://${host}:${h.up.httpPort}/v1/orgs`, token })
          expect(res.headers['x-corral-deny-reason'], host).toMatch(/destination_private|no_match/)
        }
        const r = (await rows(5))[0]!
        expect(r.detail).toMatchObject({ listener: 'corral' })
        expect(hits).toBe(0)
      } finally {
        ownPort = 0
      }
    })
  })
})
