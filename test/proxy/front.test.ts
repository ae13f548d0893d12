import { execFile } from 'node:child_process'
import { connect } from 'node:net'
import { stat } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { ProxyAgent, request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PLATFORM_ORG } from '../../src/contract/index.js'
import { LeafMinter, loadOrCreateCa } from '../../src/proxy/ca.js'
import { parseAuthority } from '../../src/proxy/front.js'
import { startHarness, type Harness } from './harness.js'

const run = promisify(execFile)

describe('ProxyFront (real sockets, no policy needed)', () => {
  let h: Harness
  beforeAll(async () => {
    h = await startHarness()
  })
  afterAll(async () => {
    await h.close()
  })

  const target = (): string => `https://127.0.0.1:${h.up.httpsPort}/v1/messages`

  it('creates the CA once in the data dir with a 0600 key, and reloads the same one', async () => {
    const dataDir = join(h.dir, 'data')
    const again = await loadOrCreateCa(dataDir)
    expect(again.certPem).toBe(h.proxy.ca.certPem)
    const mode = (await stat(join(dataDir, 'ca-key.pem'))).mode & 0o777
    expect(mode).toBe(0o600)
    expect(h.proxy.ca.certPem).not.toMatch(/PRIVATE KEY/)
  })

  it('mints a leaf once per host, also under concurrent first use', async () => {
    const minter = new LeafMinter(h.proxy.ca)
    await Promise.all([minter.contextFor('api.example.com'), minter.contextFor('API.example.com.'), minter.contextFor('api.example.com')])
    await minter.contextFor('other.example.com')
    expect(minter.minted).toBe(2)
  })

  it('parses CONNECT authorities strictly', () => {
    expect(parseAuthority('api.openai.com:443')).toEqual({ host: 'api.openai.com', port: 443 })
    expect(parseAuthority('[::1]:8443')).toEqual({ host: '::1', port: 8443 })
    expect(parseAuthority('api.openai.com')).toBeUndefined()
    expect(parseAuthority('a b:443')).toBeUndefined()
    expect(parseAuthority('host:70000')).toBeUndefined()
  })

  it('no_token: a CONNECT without Proxy-Authorization gets a 407 challenge (no tunnel) and one row', async () => {
    const before = h.audit.decisions().length
    const answer = await new Promise<string>((resolve) => {
      const s = connect(Number(new URL(h.proxyUrl).port), '127.0.0.1', () => s.write(`CONNECT 127.0.0.1:${h.up.httpsPort} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n`))
      let got = ''
      s.on('data', (d) => (got += String(d))).on('error', () => {}).on('close', () => resolve(got))
    })
    expect(answer).toMatch(/^HTTP\/1\.1 407 Proxy Authentication Required\r\n/)
    expect(answer).toMatch(/\r\nproxy-authenticate: Basic realm="corral"/)
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)).error).toMatchObject({ reason: 'no_token', phase: 'request_headers' })
    const rows = (await h.audit.waitForDecisions(before + 1)).slice(before)
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ decision: 'deny', reason: 'no_token', phase: 'request_headers', destination: '127.0.0.1', method: 'CONNECT', path: '', policy_type: 'http', actor: 'policy-engine', category: 'audit' })
  })

  it('invalid_token: a bad signature and an expired token; both stay in the platform scope, the expired one names its workspace in detail', async () => {
    const { workspaceId } = await h.workspace(null)
    const before = h.audit.decisions().length
    const good = await h.token(workspaceId)
    const forged = good.slice(0, -4) + (good.endsWith('AAAA') ? 'BBBB' : 'AAAA')
    expect((await h.fetch(target(), { token: forged })).status).toBe(403)
    const expired = await h.token(workspaceId, { ttl: 1 })
    await new Promise((r) => setTimeout(r, 7_000))
    const res = await h.fetch(target(), { token: expired })
    expect(JSON.parse(res.body).error.reason).toBe('invalid_token')
    const rows = (await h.audit.waitForDecisions(before + 2)).slice(before)
    expect(rows.map((r) => r.reason)).toEqual(['invalid_token', 'invalid_token'])
    expect(rows[0]).toMatchObject({ org_id: PLATFORM_ORG, user_id: 'system' })
    expect(rows[0]!.workspace_id).toBeUndefined()
    expect(rows[1]).toMatchObject({ org_id: PLATFORM_ORG, user_id: 'system', detail: { expired: true, token_org_id: h.orgId, token_workspace_id: workspaceId } })
    expect(rows[1]!.workspace_id).toBeUndefined()
    for (const r of rows) expect(JSON.stringify(r)).not.toContain(good.split('.')[2])
  }, 20_000)

  it('invalid_token: a keep-alive tunnel stops working when its token expires', async () => {
    const { workspaceId } = await h.workspace(null)
    const token = await h.token(workspaceId, { ttl: 1 })
    const agent = new ProxyAgent({ uri: h.proxyUrl, token: `Bearer ${token}`, requestTls: { ca: h.proxy.ca.certPem } })
    try {
      const first = await request(target(), { dispatcher: agent })
      expect(JSON.parse(await first.body.text()).error.reason).toBe('no_policy')
      await new Promise((r) => setTimeout(r, 6_500))
      const tunnels = h.proxy.stats().tunnels
      const second = await request(target(), { dispatcher: agent })
      expect(JSON.parse(await second.body.text()).error.reason).toBe('invalid_token')
      expect(h.proxy.stats().tunnels).toBe(tunnels) // same tunnel, re-checked
    } finally {
      await agent.close()
    }
  }, 20_000)

  it('workspace_not_activated: unknown workspace, stopped workspace, token of another org', async () => {
    const stopped = await h.workspace(null, 'stopped')
    const live = await h.workspace(null)
    const before = h.audit.decisions().length
    const unknown = await h.token('ws_doesnotexist')
    const otherOrg = await h.token(live.workspaceId, { org: 'org_other' })
    for (const token of [unknown, stopped.token, otherOrg]) {
      const res = await h.fetch(target(), { token })
      expect(JSON.parse(res.body).error.reason).toBe('workspace_not_activated')
    }
    const rows = (await h.audit.waitForDecisions(before + 3)).slice(before)
    expect(rows.map((r) => r.reason)).toEqual(['workspace_not_activated', 'workspace_not_activated', 'workspace_not_activated'])
  })

  it('no_policy: activates the workspace once, then denies; rows are attributed to the creator', async () => {
    const { workspaceId, token } = await h.workspace(null)
    const before = h.audit.decisions().length
    for (let i = 0; i < 2; i++) expect((await h.fetch(target(), { token })).status).toBe(403)
    const rows = (await h.audit.waitForDecisions(before + 2)).slice(before)
    expect(rows.map((r) => r.reason)).toEqual(['no_policy', 'no_policy'])
    expect(rows[0]).toMatchObject({ user_id: h.userId, org_id: h.orgId, workspace_id: workspaceId, agent_provider: 'anthropic' })
    const activated = h.audit.rows.filter((r) => r.event_type === 'workspace_activated' && r.workspace_id === workspaceId)
    expect(activated).toHaveLength(1)
    expect(activated[0]).toMatchObject({ actor: 'policy-engine', category: 'activity', user_id: h.userId })
  })

  it('curl -x with --cacert reaches the TLS front and gets the deny body inside the tunnel', async () => {
    const { token } = await h.workspace(null)
    const caFile = join(h.dir, 'data', 'ca.pem')
    const before = h.audit.decisions().length
    const { stdout } = await run('curl', ['-sS', '-x', h.proxyUrl, '--proxy-header', `Proxy-Authorization: Bearer ${token}`, '--cacert', caFile, '-w', '\n%{http_code}', `https://api.example.com/v1/models`])
    const [body, code] = stdout.split('\n')
    expect(code).toBe('403')
    expect(JSON.parse(body!).error.reason).toBe('no_policy')
    const rows = (await h.audit.waitForDecisions(before + 1)).slice(before)
    expect(rows[0]).toMatchObject({ destination: 'api.example.com', path: '/v1/models', reason: 'no_policy' })
  })

  it('no_scheme: an https:// absolute URI on the plaintext leg never reaches an upstream', async () => {
    const { token, workspaceId } = await h.workspace(null)
    const before = h.audit.decisions().length
    const { stdout } = await run('curl', ['-sS', '-H', `Proxy-Authorization: Bearer ${token}`, '-w', '\n%{http_code}', '--request-target', `https://127.0.0.1:${h.up.httpsPort}/secret`, `${h.proxyUrl}/`])
    const [body, code] = stdout.split('\n')
    expect(code).toBe('403')
    expect(JSON.parse(body!).error.reason).toBe('no_scheme')
    const rows = (await h.audit.waitForDecisions(before + 1)).slice(before)
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ reason: 'no_scheme', workspace_id: workspaceId, path: '/secret' })
  })

  it('a WebSocket upgrade inside a tunnel is a request: a workspace without policy refuses it with a 403 and one row', async () => {
    const { token, workspaceId } = await h.workspace(null)
    const before = h.audit.decisions().length
    const { stdout } = await run('curl', ['-sS', '--http1.1', '-x', h.proxyUrl, '--proxy-header', `Proxy-Authorization: Bearer ${token}`, '--cacert', join(h.dir, 'data', 'ca.pem'),
      '-H', 'Connection: Upgrade', '-H', 'Upgrade: websocket', '-H', 'Sec-WebSocket-Version: 13', '-H', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', '-w', '\n%{http_code}', `https://127.0.0.1:${h.up.httpsPort}/ws`])
    expect(stdout.trim().split('\n').pop()).toBe('403')
    const rows = (await h.audit.waitForDecisions(before + 1)).slice(before)
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ decision: 'deny', reason: 'no_policy', path: '/ws', workspace_id: workspaceId })
  })

  it('an upgrade to another protocol (h2c) inside a tunnel is refused with a 403 and one row', async () => {
    const { token, workspaceId } = await h.workspace(null)
    const before = h.audit.decisions().length
    const { stdout } = await run('curl', ['-sS', '--http1.1', '-x', h.proxyUrl, '--proxy-header', `Proxy-Authorization: Bearer ${token}`, '--cacert', join(h.dir, 'data', 'ca.pem'),
      '-H', 'Connection: Upgrade, HTTP2-Settings', '-H', 'Upgrade: h2c', '-H', 'HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA', '-w', '\n%{http_code}', `https://127.0.0.1:${h.up.httpsPort}/h2c`])
    expect(stdout.trim().split('\n').pop()).toBe('403')
    const rows = (await h.audit.waitForDecisions(before + 1)).slice(before)
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ decision: 'deny', reason: 'no_match', path: '/h2c', workspace_id: workspaceId })
  })

  it('workspace lifecycle: deactivate emits workspace_deactivated, idle state is evicted after the TTL', async () => {
    const a = await h.workspace(null)
    const b = await h.workspace(null)
    await h.fetch(target(), { token: a.token })
    await h.fetch(target(), { token: b.token })
    await h.audit.waitForDecisions(h.audit.decisions().length)
    expect(await h.proxy.workspaces.deactivate(a.workspaceId)).toBe(true)
    expect(h.audit.rows.filter((r) => r.event_type === 'workspace_deactivated' && r.workspace_id === a.workspaceId)).toHaveLength(1)
    const evicted = await h.proxy.workspaces.sweep(Date.now() + 24 * 60 * 60 * 1000)
    expect(evicted).toBeGreaterThanOrEqual(1)
    expect(h.audit.rows.filter((r) => r.event_type === 'workspace_evicted' && r.workspace_id === b.workspaceId)).toHaveLength(1)
    expect(h.proxy.workspaces.has(b.workspaceId)).toBe(false)
  })
})

describe('internal_error (a fault injected through a dependency)', () => {
  it('a throw inside a phase is a 500 internal_error with exactly one row', async () => {
    // The workspace directory the request_headers phase activates through fails with a plain error.
    const quiet = { error: () => {}, warn: () => {} }
    const h = await startHarness({ directory: { lookup: async () => { throw new Error('boom') } }, logger: quiet })
    try {
      const { token } = await h.workspace(null)
      const res = await h.fetch(`https://127.0.0.1:${h.up.httpsPort}/x`, { token })
      expect(res.status).toBe(500)
      expect(JSON.parse(res.body).error.reason).toBe('internal_error')
      const rows = await h.audit.waitForDecisions(1)
      expect(rows).toHaveLength(1)
      expect(rows[0]).toMatchObject({ decision: 'deny', reason: 'internal_error' })
      expect(JSON.stringify(rows[0])).not.toContain('boom')
    } finally {
      await h.close()
    }
  })
})
