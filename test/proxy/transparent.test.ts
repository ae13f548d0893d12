// The DNS phase and transparent egress through the real proxy: the workspace's resolver stream,
// then connections as the sandbox's listener hands them over (src/runtime/sandbox-init.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect as tlsConnect } from 'node:tls'
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startHarness, type Harness } from './harness.js'
import { dnsStream, egressConnect, startNamedUpstreams, type NamedUpstreams } from './transparent-harness.js'

const caps = (https: number, http: number) => `
- name: allowed-api
  type: http
  allow:
    - domains: ["api.allowed.dev:${https}", "plain.allowed.dev:${http}"]
      methods: [GET]
      allow_insecure: true
      allow_private: ["127.0.0.0/8"]
`

describe('DNS phase and transparent egress', () => {
  let h: Harness
  let up: NamedUpstreams
  let ws: { workspaceId: string; token: string }

  beforeAll(async () => {
    up = await startNamedUpstreams(await mkdtemp(join(tmpdir(), 'corral-named-')))
    h = await startHarness({ resolve: async () => [{ address: '127.0.0.1', family: 4 }], upstreamCaPem: [up.caPem] })
    ws = await h.workspace(caps(up.httpsPort, up.httpPort), 'idle', { raw: true })
  })
  afterAll(async () => {
    await up?.close()
    await h?.close()
  })

  const port = () => Number(new URL(h.proxyUrl).port)
  const rows = () => h.audit.decisions().filter((r) => r.workspace_id === ws.workspaceId)

  it('answers an allowed name with a synthetic address and one dns row; a denied name with one and no row', async () => {
    const dns = await dnsStream(port(), ws.token)
    const before = rows().length
    const allowed = await dns.query('API.allowed.dev.')
    expect(allowed.rcode).toBe('NOERROR')
    expect(allowed.answers).toHaveLength(1)
    const a = allowed.answers![0] as { type: string; data: string; ttl: number }
    expect(a.type).toBe('A')
    expect(a.data).toMatch(/^100\.(6[4-9]|[7-9]\d|1[01]\d|12[0-7])\./)
    expect(a.ttl).toBe(30)
    // The same name keeps its address; another name gets another.
    expect(((await dns.query('api.allowed.dev')).answers![0] as { data: string }).data).toBe(a.data)
    const denied = await dns.query('denied.elsewhere.dev')
    expect((denied.answers![0] as { data: string }).data).not.toBe(a.data)
    await new Promise((r) => setTimeout(r, 50))
    const dnsRows = rows().slice(before)
    expect(dnsRows).toHaveLength(2)
    for (const r of dnsRows) expect(r).toMatchObject({ policy_type: 'dns', phase: 'dns', decision: 'allow', destination: 'api.allowed.dev', capability_name: 'allowed-api', workspace_id: ws.workspaceId })
    dns.close()
  })

  it('refuses what it does not serve and answers NXDOMAIN for names that cannot exist; AAAA is empty', async () => {
    const dns = await dnsStream(port(), ws.token)
    expect((await dns.query('api.allowed.dev', 'AAAA'))).toMatchObject({ rcode: 'NOERROR', answers: [] })
    expect((await dns.query('api.allowed.dev', 'ANY')).rcode).toBe('REFUSED')
    expect((await dns.query('allowed.dev', 'AXFR')).rcode).toBe('REFUSED')
    expect((await dns.query('api.allowed.dev', 'A', 'CH')).rcode).toBe('REFUSED')
    expect((await dns.query('intranet')).rcode).toBe('NXDOMAIN')
    expect((await dns.query('db.corp.local')).rcode).toBe('NXDOMAIN')
    expect((await dns.query('1.0.0.127.in-addr.arpa', 'PTR')).rcode).toBe('NXDOMAIN')
    expect((await dns.query('-bad-.allowed.dev')).rcode).toBe('NXDOMAIN')
    dns.close()
  })

  async function resolve(name: string): Promise<string> {
    const dns = await dnsStream(port(), ws.token)
    const r = await dns.query(name)
    dns.close()
    return (r.answers![0] as { data: string }).data
  }

  it('intercepts TLS to an allowed name\'s synthetic address as a CONNECT to the name: dns row, then http row', async () => {
    const address = await resolve('api.allowed.dev')
    const { socket, status } = await egressConnect(port(), `${address}:${up.httpsPort}`, ws.token)
    expect(status).toBe('HTTP/1.1 200 Connection Established')
    const tls = tlsConnect({ socket, servername: 'api.allowed.dev', ca: h.proxy.ca.certPem })
    await new Promise<void>((r, j) => { tls.once('secureConnect', r); tls.once('error', j) })
    tls.write('GET /hello HTTP/1.1\r\nhost: api.allowed.dev\r\nconnection: close\r\n\r\n')
    let text = ''
    tls.on('data', (c: Buffer) => (text += c.toString()))
    await new Promise((r) => tls.once('close', r))
    expect(text).toMatch(/^HTTP\/1\.1 200/)
    expect(text).toContain('hello api.allowed.dev')
    const row = (await waitFor(() => rows().find((r) => r.policy_type === 'http' && r.path === '/hello')))!
    expect(row).toMatchObject({ decision: 'allow', destination: 'api.allowed.dev', capability_name: 'allowed-api', phase: 'response_body' })
  })

  it('intercepts plain HTTP by its Host header, and refuses a Host that is not the resolved name', async () => {
    const address = await resolve('plain.allowed.dev')
    const ok = await egressConnect(port(), `${address}:${up.httpPort}`, ws.token)
    ok.socket.resume()
    ok.socket.write('GET /plain HTTP/1.1\r\nhost: plain.allowed.dev\r\nconnection: close\r\n\r\n')
    expect(await readAll(ok.socket)).toContain('hello plain.allowed.dev')
    const other = await egressConnect(port(), `${address}:${up.httpPort}`, ws.token)
    other.socket.resume()
    other.socket.write('GET /sneaky HTTP/1.1\r\nhost: api.allowed.dev\r\nconnection: close\r\n\r\n')
    expect(await readAll(other.socket)).toMatch(/^HTTP\/1\.1 403/)
    expect(up.hits).not.toContain('api.allowed.dev /sneaky')
    const row = await waitFor(() => rows().find((r) => r.path === '/sneaky'))
    expect(row).toMatchObject({ decision: 'deny', reason: 'no_match', destination: 'plain.allowed.dev', policy_type: 'http' })
  })

  it('refuses a WebSocket upgrade whose Host is not the resolved name, before anything reaches the upstream', async () => {
    const address = await resolve('plain.allowed.dev')
    const other = await egressConnect(port(), `${address}:${up.httpPort}`, ws.token)
    other.socket.resume()
    other.socket.write('GET /sneaky-ws HTTP/1.1\r\nhost: api.allowed.dev\r\nconnection: upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n')
    expect(await readAll(other.socket)).toMatch(/^HTTP\/1\.1 403/)
    expect(up.hits.some((h) => h.includes('/sneaky-ws'))).toBe(false)
    const row = await waitFor(() => rows().find((r) => r.path === '/sneaky-ws'))
    expect(row).toMatchObject({ decision: 'deny', reason: 'no_match', destination: 'plain.allowed.dev', policy_type: 'http' })
  })

  it('denies a denied name at the request phase with one http row and nothing at the upstream', async () => {
    const address = await resolve('denied.elsewhere.dev')
    const { socket } = await egressConnect(port(), `${address}:${up.httpsPort}`, ws.token)
    const tls = tlsConnect({ socket, servername: 'denied.elsewhere.dev', ca: h.proxy.ca.certPem })
    await new Promise<void>((r, j) => { tls.once('secureConnect', r); tls.once('error', j) })
    tls.write('GET /nope HTTP/1.1\r\nhost: denied.elsewhere.dev\r\nconnection: close\r\n\r\n')
    expect(await readAll(tls)).toMatch(/^HTTP\/1\.1 403/)
    const denied = rows().filter((r) => r.destination === 'denied.elsewhere.dev')
    expect(denied).toHaveLength(1)
    expect(denied[0]).toMatchObject({ policy_type: 'http', phase: 'request_headers', decision: 'deny', reason: 'no_match' })
    expect(up.hits.some((x) => x.startsWith('denied.elsewhere.dev'))).toBe(false)
  })

  it('refuses SSH to a resolved name, and any address the resolver did not hand out, with a row naming destination and port', async () => {
    const address = await resolve('api.allowed.dev')
    const ssh = await egressConnect(port(), `${address}:22`, ws.token)
    ssh.socket.resume()
    ssh.socket.write('SSH-2.0-OpenSSH_9.6\r\n')
    await new Promise((r) => ssh.socket.once('close', r))
    expect(await waitFor(() => rows().find((r) => r.detail?.protocol === 'ssh'))).toMatchObject({ decision: 'deny', reason: 'no_match', destination: 'api.allowed.dev', detail: { port: 22, egress: 'transparent' } })
    const raw = await egressConnect(port(), '203.0.113.9:5432', ws.token)
    expect(raw.status).toMatch(/^HTTP\/1\.1 403/)
    expect(rows().find((r) => r.destination === '203.0.113.9')).toMatchObject({ decision: 'deny', reason: 'no_match', detail: { port: 5432 } })
  })
})

async function readAll(s: NodeJS.ReadableStream & { once(e: 'close', f: () => void): unknown }): Promise<string> {
  let text = ''
  s.on('data', (c: Buffer) => (text += c.toString()))
  await new Promise<void>((r) => s.once('close', r))
  return text
}

async function waitFor<T>(f: () => T | undefined, ms = 5_000): Promise<T | undefined> {
  const end = Date.now() + ms
  for (;;) {
    const v = f()
    if (v !== undefined || Date.now() > end) return v
    await new Promise((r) => setTimeout(r, 10))
  }
}
