// Class: server-side fetches reach no address the operator did not open (issue 15's boundary,
// applied to what serve itself fetches). An `auth:write` holder chooses an OAuth credential's
// issuer or token URL, and serve fetches it (discovery at create, the code exchange at the callback,
// refreshes in the proxy). Before: any https URL was fetched — loopback, 10.x, the cloud metadata
// address 169.254.169.254, serve's own listeners. Now every connection goes through the proxy's
// address guard (src/net/): each resolved address, each redirect hop and each later call again.
// Shapes: literal IPv4, IPv6, mapped and abbreviated forms, a name resolving to loopback, an
// explicit token_url, a discovery document naming a private token endpoint, a redirect to a refused
// address, a token call after the operator's opt-in is gone, serve's own listener under the opt-in.
// Each refusal at create is a 400 on its field naming the opt-in, and nothing is stored or fetched.
import { createServer, type Server } from 'node:https'
import { mkdtempSync, rmSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as client from 'openid-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AddressGuard } from '../../src/net/index.js'
import { LeafMinter, loadOrCreateCa } from '../../src/proxy/index.js'
import { OAuthHttp, Sealer } from '../../src/secrets/index.js'
import { testDialects } from '../helpers/dialects.js'
import { createHarness, type Harness } from '../server/harness.js'

/** An HTTPS server on loopback that counts what reached it and answers as `answer` says. */
async function countingServer(tls: { cert: string; key: string }, answer: (path: string, origin: string) => { status: number; headers?: Record<string, string>; body?: unknown }) {
  const paths: string[] = []
  const server: Server = createServer(tls, (req, res) => {
    paths.push(req.url ?? '')
    const a = answer(req.url ?? '', origin)
    res.writeHead(a.status, { 'content-type': 'application/json', ...a.headers })
    res.end(a.body === undefined ? '' : JSON.stringify(a.body))
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const port = (server.address() as AddressInfo).port
  const origin = `https://127.0.0.1:${port}`
  return { paths, port, origin, close: () => new Promise<void>((r) => server.close(() => r())) }
}

const discovery = (origin: string, token = `${origin}/token`) => ({
  issuer: origin, authorization_endpoint: `${origin}/authorize`, token_endpoint: token, response_types_supported: ['code'],
})

for (const d of testDialects()) describe(`server-side fetches obey the address guard [${d.name}]`, () => {
  let h: Harness
  let dir: string
  let tls: { cert: string; key: string }
  let caPem: string
  let org: Awaited<ReturnType<Harness['newOrg']>>
  let idp: Awaited<ReturnType<typeof countingServer>>
  const closers: Array<() => Promise<unknown>> = []
  const http = (o: ConstructorParameters<typeof OAuthHttp>[0] = {}) => {
    const made = new OAuthHttp({ extraCaPem: [caPem], ...o })
    closers.push(() => made.close())
    return made
  }
  const create = (patch: Record<string, unknown>) =>
    h.inject('POST', '/v1/credentials', {
      token: org.ownerKey,
      body: { name: `c${Math.random().toString(36).slice(2, 8)}`, provider: 'google', kind: 'oauth', client_id: 'id', client_secret: 'cs_secret', scopes: ['openid'], ...patch },
    })
  /** No credential, no credential_created row: nothing was stored. */
  const nothingStored = async () => {
    expect((await h.inject('GET', '/v1/credentials', { token: org.ownerKey })).body.credentials).toEqual([])
    await h.audit.flush()
    expect(await h.store.audit.page(org.orgId, { filters: [{ column: 'event_type', op: 'in', values: ['credential_created'] }], order: 'asc', limit: 10 } as never)).toEqual([])
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'corral-server-fetches-'))
    const ca = await loadOrCreateCa(dir)
    caPem = ca.certPem
    tls = await new LeafMinter(ca).pemFor('127.0.0.1')
    idp = await countingServer(tls, (path, origin) => (path.startsWith('/.well-known/') ? { status: 200, body: discovery(origin) } : { status: 404 }))
    h = await createHarness({ open: d.open, sealer: new Sealer(Buffer.alloc(32, 9)) })
    org = await h.newOrg()
  })
  afterAll(async () => {
    for (const c of closers) await c()
    await idp?.close()
    await h?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('without the operator opt-in, an issuer at loopback, private, link-local or mapped addresses is refused on its field; nothing fetched or stored', async () => {
    h.deps.oauth = { publicUrl: undefined, http: http() }
    for (const issuer of [idp.origin, `https://localhost:${idp.port}`, 'https://169.254.169.254', 'https://10.0.0.1', 'https://[::1]:8443', 'https://[::ffff:127.0.0.1]', 'https://0x7f.1', 'https://192.168.1.1/realms/x']) {
      const res = await create({ issuer })
      expect(res.status, issuer).toBe(400)
      expect(res.body.error.code).toBe('validation_error')
      expect(res.body.error.details.fields.issuer, issuer).toMatch(/loopback, private, link-local or other special-purpose address.*CORRAL_OAUTH_ALLOW_PRIVATE/)
    }
    const token = await create({ authorization_url: 'https://accounts.example.com/auth', token_url: 'https://10.20.30.40/token' })
    expect(token.status).toBe(400)
    expect(token.body.error.details.fields.token_url).toMatch(/CORRAL_OAUTH_ALLOW_PRIVATE/)
    expect(idp.paths).toEqual([])
    await nothingStored()
  })

  it('with the opt-in for loopback: a discovery document naming a private token endpoint is refused; a clean one is stored', async () => {
    const evil = await countingServer(tls, (path, origin) => ({ status: 200, body: discovery(origin, 'https://169.254.169.254/latest/meta-data/token') }))
    closers.push(evil.close)
    h.deps.oauth = { publicUrl: undefined, http: http({ allowPrivate: ['127.0.0.1/32'] }) }
    const res = await create({ issuer: evil.origin })
    expect(res.status).toBe(400)
    expect(res.body.error.details.fields.issuer).toMatch(/^the discovered token_endpoint resolves to a loopback, private/)
    expect(evil.paths).toEqual(['/.well-known/openid-configuration'])
    await nothingStored()

    const ok = await create({ issuer: idp.origin })
    expect(ok.status).toBe(201)
    expect(ok.body.status).toBe('pending')
  })

  it("serve's own listener is refused even under an opt-in that covers its address", async () => {
    const own = new AddressGuard(() => [{ host: '127.0.0.1', port: idp.port }])
    h.deps.oauth = { publicUrl: undefined, http: http({ guard: own, allowPrivate: ['127.0.0.0/8'] }) }
    const before = idp.paths.length
    const res = await create({ issuer: idp.origin })
    expect(res.status).toBe(400)
    expect(res.body.error.details.fields.issuer).toMatch(/names a listener of corral serve itself/)
    expect(idp.paths.length).toBe(before)
  })

  it('every connection is checked again: a redirect hop to a refused address, a token call once the opt-in is gone', async () => {
    const target = await countingServer(tls, () => ({ status: 200, body: {} }))
    closers.push(target.close)
    const hop = await countingServer(tls, () => ({ status: 302, headers: { location: `https://localhost:${target.port}/x` } }))
    closers.push(hop.close)
    // 127.0.0.1 is opened; localhost also resolves to ::1 (refused), or to 127.0.0.1 only — then the
    // listener check below is what refuses it: either way the hop is checked where it connects.
    const guarded = http({ allowPrivate: ['127.0.0.1/32'], guard: new AddressGuard(() => [{ host: '127.0.0.1', port: target.port }]) })
    const err = await (guarded.fetch as unknown as typeof fetch)(`${hop.origin}/start`, { redirect: 'follow' }).then(() => undefined, (e: unknown) => e)
    expect(OAuthHttp.refusal(err)).toBeDefined()
    expect(hop.paths).toEqual(['/start'])
    expect(target.paths).toEqual([])

    const config = http().configuration({ issuer: idp.origin, authorization_endpoint: `${idp.origin}/authorize`, token_endpoint: `${idp.origin}/token` }, 'id', 'cs_secret')
    const before = idp.paths.length
    const refresh = await client.refreshTokenGrant(config, 'rt_value').then(() => undefined, (e: unknown) => e)
    expect(OAuthHttp.refusal(refresh)).toBeDefined()
    expect(idp.paths.length).toBe(before)
  })
})
