// The proxy front's resource limits (src/proxy/limits.ts, docs/reliability.md "Limits"): each
// one hit is a clear answer with a reason and leaves the proxy serving.
import { mkdtempSync, rmSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DEFAULT_LIMITS, InvalidLimitError, resolveLimits } from '../../src/proxy/limits.js'
import { exchangeOn, openTunnel, tlsOver } from '../helpers/raw-socket.js'
import { startServe } from '../helpers/serve.js'
import { startHarness, type Harness } from './harness.js'

const CAPS = `
- name: up
  type: http
  allow:
    - domains: ["127.0.0.1"]
      methods: [GET, POST]
`

describe('resolveLimits', () => {
  it('defaults, then the environment, then explicit values; a bad value names its variable', () => {
    expect(resolveLimits({})).toEqual(DEFAULT_LIMITS)
    expect(resolveLimits({ CORRAL_PROXY_MAX_CONNECTIONS: '12' }).maxConnections).toBe(12)
    expect(resolveLimits({ CORRAL_PROXY_MAX_CONNECTIONS: '12' }, { maxConnections: 3 }).maxConnections).toBe(3)
    for (const bad of ['0', '-1', '1.5', 'lots', '1e3']) {
      expect(() => resolveLimits({ CORRAL_PROXY_IDLE_TIMEOUT_MS: bad })).toThrow(InvalidLimitError)
    }
    expect(() => resolveLimits({ CORRAL_PROXY_IDLE_TIMEOUT_MS: 'x' })).toThrow(/CORRAL_PROXY_IDLE_TIMEOUT_MS/)
  })

  it('the real serve refuses to start with a bad value, naming the variable', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'corral-limits-'))
    try {
      await expect(startServe({ dataDir, env: { CORRAL_PROXY_IDLE_TIMEOUT_MS: 'soon' } })).rejects.toThrow(/CORRAL_PROXY_IDLE_TIMEOUT_MS must be a positive integer/)
    } finally {
      rmSync(dataDir, { recursive: true, force: true })
    }
  })
})

describe('proxy limits (real sockets)', () => {
  let h: Harness
  let port: number
  const held: ServerResponse[] = []

  beforeAll(async () => {
    h = await startHarness({ limits: { maxConnections: 40, maxConnectionsPerWorkspace: 4, maxInFlightPerWorkspace: 2, maxBodyBytes: 1_000 } })
    port = Number(new URL(h.proxyUrl).port)
    h.up.handler.current = (req: IncomingMessage, res: ServerResponse) => {
      if (req.url === '/hold') return void held.push(res)
      req.resume()
      req.on('end', () => res.end('ok'))
    }
  })
  afterAll(async () => {
    for (const r of held) r.end()
    await h.close()
  })

  const target = (): string => `127.0.0.1:${h.up.httpsPort}`

  it('connections per workspace: the tunnel past the limit is refused 429 limit_exceeded with one row; a closed one frees its slot', async () => {
    // A workspace of its own: the other tests' clients keep their keep-alive tunnels open.
    const { token, workspaceId } = await h.workspace(CAPS)
    const open = await Promise.all([1, 2, 3, 4].map(() => openTunnel(port, target(), token)))
    const before = h.audit.decisions().length
    await expect(openTunnel(port, target(), token)).rejects.toThrow(/429/)
    const rows = h.audit.decisions().slice(before)
    expect(rows).toMatchObject([{ org_id: h.orgId, workspace_id: workspaceId, method: 'CONNECT', reason: 'limit_exceeded', detail: { limit: 'connections_per_workspace', max: 4 } }])
    // Another workspace is not affected by this one's tunnels.
    const other = await h.workspace(CAPS)
    ;(await openTunnel(port, target(), other.token)).socket.destroy()
    open[0]!.socket.destroy()
    await new Promise((r) => setTimeout(r, 50))
    const again = await openTunnel(port, target(), token)
    for (const t of [...open, again]) t.socket.destroy()
  })

  it('in-flight requests per workspace: the request past the limit is denied 429 limit_exceeded', async () => {
    const { token } = await h.workspace(CAPS)
    const url = `https://${target()}/hold`
    const first = [h.open(url, { token }), h.open(url, { token })]
    while (held.length < 2) await new Promise((r) => setTimeout(r, 10))
    const before = h.audit.decisions().length
    const res = await h.fetch(`https://${target()}/third`, { token })
    expect(res.status).toBe(429)
    expect(JSON.parse(res.body).error).toMatchObject({ reason: 'limit_exceeded', detail: { limit: 'inflight_per_workspace', max: 2 } })
    expect(h.audit.decisions().slice(before)).toMatchObject([{ path: '/third', reason: 'limit_exceeded' }])
    for (const r of held.splice(0)) r.end('done')
    await Promise.all(first.map(async (p) => (await p).text()))
    expect((await h.fetch(`https://${target()}/after`, { token })).status).toBe(200)
  })

  it('request body size: a declared length over the limit is 413 before anything is sent; a chunked body over it is cut with the same reason', async () => {
    const { token } = await h.workspace(CAPS)
    const before = h.audit.decisions().length
    const declared = await h.fetch(`https://${target()}/big`, { token, method: 'POST', body: 'x'.repeat(2_000) })
    expect(declared.status).toBe(413)
    expect(JSON.parse(declared.body).error).toMatchObject({ reason: 'limit_exceeded', detail: { limit: 'body_bytes', max: 1_000 } })
    const { socket } = await openTunnel(port, target(), token)
    const tls = await tlsOver(socket, '127.0.0.1', h.proxy.ca.certPem)
    const chunk = (s: string): string => `${s.length.toString(16)}\r\n${s}\r\n`
    const res = await exchangeOn(tls, [
      `POST /chunked HTTP/1.1\r\nhost: 127.0.0.1\r\nproxy-authorization: Bearer ${token}\r\ntransfer-encoding: chunked\r\n\r\n`,
      chunk('y'.repeat(600)), 20, chunk('y'.repeat(600)), 20, '0\r\n\r\n',
    ])
    expect(res.status).toMatch(/^HTTP\/1\.1 413 /)
    const rows = (await h.audit.waitForDecisions(before + 2)).slice(before)
    expect(rows.map((r) => [r.path, r.reason, r.detail?.limit])).toEqual([
      ['/big', 'limit_exceeded', 'body_bytes'],
      ['/chunked', 'limit_exceeded', 'body_bytes'],
    ])
  })

  it('total connections: idle sockets past maxConnections are closed at accept and counted; the proxy keeps serving', async () => {
    const { token } = await h.workspace(CAPS)
    const refusedBefore = h.proxy.stats().connectionsRefused
    const sockets: Socket[] = []
    const closed: Promise<void>[] = []
    for (let i = 0; i < 120; i++) {
      const s = connect(port, '127.0.0.1')
      s.on('error', () => {})
      closed.push(new Promise((r) => s.once('close', () => r())))
      sockets.push(s)
    }
    await new Promise((r) => setTimeout(r, 300))
    const stillOpen = sockets.filter((s) => !s.destroyed && s.readyState === 'open').length
    expect(stillOpen).toBeLessThanOrEqual(40)
    expect(h.proxy.stats().connectionsRefused - refusedBefore).toBeGreaterThanOrEqual(80)
    for (const s of sockets) s.destroy()
    await Promise.all(closed)
    await new Promise((r) => setTimeout(r, 50))
    expect((await h.fetch(`https://${target()}/served`, { token })).status).toBe(200)
  })
})
