// Attacks on the DNS phase and transparent egress (docs/security.md "Transparent egress"): the
// resolver never hands out a real address, an address means a name only in the workspace that was
// given it, the TLS server name must be the resolved name, and a flood of lookups is bounded per
// workspace without touching another's.
import { mkdtemp } from 'node:fs/promises'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { connect as tlsConnect } from 'node:tls'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startHarness, type Harness } from '../proxy/harness.js'
import { dnsStream, egressConnect, startNamedUpstreams, type NamedUpstreams } from '../proxy/transparent-harness.js'

// The proxy's own resolution (what the system resolver would answer, CNAMEs followed): names of
// the attacker's point at private addresses.
const REAL: Record<string, string> = { 'rebind.attacker.dev': '127.0.0.1', 'cname.attacker.dev': '10.0.0.8' }

const caps = (https: number) => `
- name: api
  type: http
  allow:
    - domains: ["api.allowed.dev:${https}"]
      methods: [GET]
      allow_private: ["127.0.0.0/8"]
- name: attacker
  type: http
  allow:
    - domains: ["rebind.attacker.dev:${https}", "cname.attacker.dev:${https}"]
      methods: [GET]
`

describe('transparent egress attacks', () => {
  let h: Harness
  let up: NamedUpstreams
  let a: { workspaceId: string; token: string }
  let b: { workspaceId: string; token: string }
  const port = () => Number(new URL(h.proxyUrl).port)
  const rows = (ws: string) => h.audit.decisions().filter((r) => r.workspace_id === ws)

  beforeAll(async () => {
    up = await startNamedUpstreams(await mkdtemp(join(tmpdir(), 'corral-named-')))
    h = await startHarness({ resolve: async (name) => [{ address: REAL[name] ?? '127.0.0.1', family: 4 }], upstreamCaPem: [up.caPem], resolverLimits: { queriesPerSecond: 1, burst: 100, maxNames: 50 } })
    a = await h.workspace(caps(up.httpsPort), 'idle', { raw: true })
    b = await h.workspace(caps(up.httpsPort), 'idle', { raw: true })
  })
  afterAll(async () => {
    await up?.close()
    await h?.close()
  })

  async function resolve(token: string, name: string): Promise<string> {
    const dns = await dnsStream(port(), token)
    const r = await dns.query(name)
    dns.close()
    return (r.answers![0] as { data: string }).data
  }

  async function tlsRequest(address: string, servername: string | undefined, token: string, path: string): Promise<{ text: string; error?: string }> {
    const { socket } = await egressConnect(port(), `${address}:${up.httpsPort}`, token)
    const tls = tlsConnect({ socket, ...(servername ? { servername } : {}), ca: h.proxy.ca.certPem, rejectUnauthorized: false })
    let text = ''
    tls.on('data', (c: Buffer) => (text += c.toString()))
    const error = await new Promise<string | undefined>((r) => {
      tls.once('secureConnect', () => tls.write(`GET ${path} HTTP/1.1\r\nhost: ${servername ?? 'x'}\r\nconnection: close\r\n\r\n`))
      tls.once('error', (e) => r(e.message))
      tls.once('close', () => r(undefined))
    })
    return { text, ...(error ? { error } : {}) }
  }

  it('DNS rebinding: the resolver answers only synthetic addresses; the proxy\'s own resolution is checked when it dials', async () => {
    const first = await resolve(a.token, 'rebind.attacker.dev')
    expect(first).toMatch(/^100\./)
    expect(await resolve(a.token, 'rebind.attacker.dev')).toBe(first)
    const res = await tlsRequest(first, 'rebind.attacker.dev', a.token, '/rebind')
    expect(res.text).toMatch(/^HTTP\/1\.1 403/)
    expect(rows(a.workspaceId).find((r) => r.path === '/rebind')).toMatchObject({ decision: 'deny', reason: 'destination_private' })
    expect(up.hits.some((x) => x.includes('/rebind'))).toBe(false)
  })

  it('a CNAME to a private address (followed by the proxy\'s resolver) is refused at dial time', async () => {
    const address = await resolve(a.token, 'cname.attacker.dev')
    const res = await tlsRequest(address, 'cname.attacker.dev', a.token, '/cname')
    expect(res.text).toMatch(/^HTTP\/1\.1 403/)
    expect(rows(a.workspaceId).find((r) => r.path === '/cname')).toMatchObject({ decision: 'deny', reason: 'destination_private' })
  })

  it('an address handed to another workspace means nothing here: refused with a row', async () => {
    const theirs = await resolve(b.token, 'only-b.allowed.dev')
    const { status } = await egressConnect(port(), `${theirs}:${up.httpsPort}`, a.token)
    // Either the address is unknown to workspace a (403), or it is a's address for another name and
    // the SNI check below refuses it.
    if (status.startsWith('HTTP/1.1 403')) {
      expect(rows(a.workspaceId).find((r) => r.destination === theirs)).toMatchObject({ decision: 'deny', reason: 'no_match', detail: { egress: 'transparent' } })
    } else {
      const res = await tlsRequest(theirs, 'only-b.allowed.dev', a.token, '/cross')
      expect(res.text).toBe('')
    }
    expect(up.hits.some((x) => x.startsWith('only-b.allowed.dev'))).toBe(false)
  })

  it('refuses a TLS server name that differs from the resolved name, and a ClientHello without one', async () => {
    const address = await resolve(a.token, 'innocent.elsewhere.dev')
    const spoofed = await tlsRequest(address, 'api.allowed.dev', a.token, '/spoof')
    expect(spoofed.text).toBe('')
    expect(rows(a.workspaceId).find((r) => r.detail?.sni === 'api.allowed.dev')).toMatchObject({ decision: 'deny', reason: 'no_match', destination: 'innocent.elsewhere.dev' })
    const bare = await tlsRequest(address, undefined, a.token, '/bare')
    expect(bare.text).toBe('')
    expect(rows(a.workspaceId).find((r) => String(r.detail?.message ?? '').includes('without a server name'))).toMatchObject({ decision: 'deny', destination: 'innocent.elsewhere.dev' })
    expect(up.hits.some((x) => x.includes('/spoof') || x.includes('/bare'))).toBe(false)
  })

  it('a flood of random names is bounded per workspace; another workspace is unaffected', async () => {
    // A workspace of its own: its spent query allowance must not leak into the other tests.
    const flooder = await h.workspace(caps(up.httpsPort), 'idle', { raw: true })
    const dns = await dnsStream(port(), flooder.token)
    const answers = await Promise.all(Array.from({ length: 1200 }, (_, i) => dns.query(`n${i}-${Math.random().toString(36).slice(2)}.flood.dev`)))
    dns.close()
    // Here a workspace may ask 100 at once (then 1 a second) and hold 50 names: the rest is refused.
    const refused = answers.filter((x) => x.rcode === 'REFUSED').length
    const answered = answers.filter((x) => x.rcode === 'NOERROR').length
    const exhausted = answers.filter((x) => x.rcode === 'SERVFAIL').length
    expect(answered).toBe(50)
    expect(exhausted).toBeGreaterThanOrEqual(50)
    expect(refused).toBeGreaterThanOrEqual(1000)
    expect(answered + exhausted + refused).toBe(1200)
    // No row for any of them: none is a name the policy allows.
    expect(rows(flooder.workspaceId).filter((r) => String(r.destination).endsWith('.flood.dev'))).toEqual([])
    expect(await resolve(b.token, 'api.allowed.dev')).toMatch(/^100\./)
  })

  it('UDP reports cost rows only within a bound: an agent replaying them with its own token cannot flood the log', async () => {
    const flooder = await h.workspace(caps(up.httpsPort), 'idle', { raw: true })
    const report = async (token: string, target: string) => {
      const { socket, status } = await egressConnect(port(), target, token, 'udp')
      socket.destroy()
      return status
    }
    const statuses = []
    for (let i = 0; i < 200; i++) statuses.push(await report(flooder.token, '198.51.100.30:4000'))
    for (let p = 1; p <= 200; p++) statuses.push(await report(flooder.token, `198.51.100.31:${p}`))
    // Every report is refused; none opens anything.
    expect(statuses.every((s) => s.startsWith('HTTP/1.1 403'))).toBe(true)
    const udp = rows(flooder.workspaceId).filter((r) => r.detail?.protocol === 'udp')
    // One row for the repeated destination; a burst of 5 (then 5 a second) across the others.
    expect(udp.filter((r) => r.destination === '198.51.100.30')).toEqual([expect.objectContaining({ decision: 'deny', reason: 'no_match', detail: expect.objectContaining({ port: 4000, egress: 'transparent' }) })])
    expect(udp.length).toBeLessThan(100)
    // What was only counted rides on the next row written (the allowance refills 5 a second).
    await sleep(300)
    expect(await report(flooder.token, '198.51.100.33:1')).toMatch(/^HTTP\/1\.1 403/)
    expect(rows(flooder.workspaceId).find((r) => r.destination === '198.51.100.33')?.detail?.suppressed).toBeGreaterThan(0)
    // Another workspace's report is unaffected.
    expect(await report(b.token, '198.51.100.32:53')).toMatch(/^HTTP\/1\.1 403/)
    expect(rows(b.workspaceId).filter((r) => r.destination === '198.51.100.32')).toEqual([expect.objectContaining({ detail: expect.objectContaining({ port: 53, protocol: 'udp' }) })])
  })

  it('the control plane\'s own names: nothing local resolves, and no answer is ever a real address', async () => {
    const dns = await dnsStream(port(), a.token)
    for (const name of ['localhost', 'api.localhost', hostname(), 'corral.local', '1.0.0.127.in-addr.arpa']) {
      expect((await dns.query(name)).rcode, name).toBe('NXDOMAIN')
    }
    for (const name of ['corral.internal', 'resolver.corral.internal', 'metadata.google.internal']) {
      const r = await dns.query(name)
      expect((r.answers![0] as { data: string }).data, name).toMatch(/^100\./)
    }
    dns.close()
  })
})
