// The OAuth routes through the real app (test/server/harness.ts) against a real OIDC provider
// (test/helpers/oidc.ts), on SQLite and PostgreSQL: `POST /v1/credentials` kind oauth, `oauth/start`
// (permissions, the state cookie pair, oauth_unavailable without a public URL or a master key) and
// `GET /v1/oauth/callback` (no bearer; JSON or an HTML page; every refusal in the envelope). No
// response carries the client secret, a refresh token or an access token.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LeafMinter, loadOrCreateCa } from '../../src/proxy/index.js'
import { OAuthHttp, Sealer } from '../../src/secrets/index.js'
import { testDialects } from '../helpers/dialects.js'
import { startOidcProvider, type OidcProvider } from '../helpers/oidc.js'
import { createHarness, type Harness } from '../server/harness.js'

const PUBLIC_URL = 'https://corral.example.test/'
const REDIRECT = 'https://corral.example.test/v1/oauth/callback'

for (const d of testDialects()) {
  describe(`OAuth routes [${d.name}]`, () => {
    let h: Harness
    let idp: OidcProvider
    let http: OAuthHttp
    let dir: string
    let org: Awaited<ReturnType<Harness['newOrg']>>
    let credId = ''
    const answers: string[] = [] // every response body, checked for secrets at the end

    const call = async (method: 'GET' | 'POST', url: string, o: Parameters<Harness['inject']>[2] = {}) => {
      const res = await h.inject(method, url, o)
      answers.push(res.raw, JSON.stringify(res.headers))
      return res
    }
    const start = () => call('POST', `/v1/credentials/${credId}/oauth/start`, { token: org.ownerKey })
    const cookiesOf = (res: { headers: Record<string, unknown> }) =>
      ([res.headers['set-cookie']].flat() as string[]).map((c) => c.split(';')[0]).join('; ')
    const callbackPath = (u: URL) => `/v1/oauth/callback${u.search}`

    beforeAll(async () => {
      h = await createHarness({ open: d.open })
      dir = mkdtempSync(join(tmpdir(), 'corral-oauth-routes-'))
      const ca = await loadOrCreateCa(dir)
      idp = await startOidcProvider({ tls: await new LeafMinter(ca).pemFor('127.0.0.1'), caPem: ca.certPem, redirectUri: REDIRECT })
      http = new OAuthHttp({ extraCaPem: [ca.certPem], allowPrivate: ['127.0.0.1/32'] }) // the provider is on loopback: the operator's opt-in
      org = await h.newOrg()
    })
    afterAll(async () => {
      await h?.close()
      await http?.close()
      await idp?.close()
      rmSync(dir, { recursive: true, force: true })
    })

    const body = () => ({
      name: 'outlook', provider: 'microsoft', kind: 'oauth', issuer: idp.issuer, client_id: idp.clientId, client_secret: idp.clientSecret, scopes: ['openid', 'offline_access'],
    })

    it('without a master key: creating answers service_unavailable, starting oauth_unavailable', async () => {
      const created = await call('POST', '/v1/credentials', { token: org.ownerKey, body: body() })
      expect(created.status).toBe(503)
      const started = await call('POST', '/v1/credentials/cred_x/oauth/start', { token: org.ownerKey })
      expect(started.status).toBe(503)
      expect(started.body.error.code).toBe('oauth_unavailable')
      h.deps.sealer = new Sealer(Buffer.alloc(32, 7))
      h.deps.oauth = { publicUrl: undefined, http }
    })

    it('POST /v1/credentials kind oauth: pending, scopes echoed; bad input is validation_error on its field', async () => {
      const bad = async (patch: Record<string, unknown>, field: string) => {
        const res = await call('POST', '/v1/credentials', { token: org.ownerKey, body: { ...body(), ...patch } })
        expect(res.status).toBe(400)
        expect(res.body.error.code).toBe('validation_error')
        expect(Object.keys(res.body.error.details.fields)).toEqual([field])
      }
      await bad({ client_secret: undefined }, 'client_secret')
      await bad({ provider: 'github' }, 'provider')
      await bad({ issuer: undefined }, 'issuer')
      await bad({ issuer: 'ftp://idp.example' }, 'issuer')
      await bad({ issuer: undefined, authorization_url: 'https://idp.example/auth', token_url: 'http://idp.example/token' }, 'token_url')
      await bad({ scopes: ['bad scope'] }, 'scopes')
      const plain = await call('POST', '/v1/credentials', { token: org.ownerKey, body: { name: 'g', provider: 'google', kind: 'static_token', token: 't' } })
      expect(plain.status).toBe(400)
      const res = await call('POST', '/v1/credentials', { token: org.ownerKey, body: body() })
      expect(res.status).toBe(201)
      expect(res.body).toMatchObject({ name: 'outlook', provider: 'microsoft', kind: 'oauth', status: 'pending', scopes: ['openid', 'offline_access'] })
      credId = res.body.id
      const explicit = await call('POST', '/v1/credentials', {
        token: org.ownerKey,
        body: { ...body(), name: 'plain-oauth', issuer: undefined, authorization_url: `${idp.issuer}/auth`, token_url: `${idp.issuer}/token` },
      })
      expect(explicit.status).toBe(201)
      const list = await call('GET', '/v1/credentials', { token: org.ownerKey })
      expect(list.body.credentials.map((c: { name: string; status: string }) => [c.name, c.status])).toEqual([['outlook', 'pending'], ['plain-oauth', 'pending']])
    })

    it('start without a public URL is oauth_unavailable; with one, the auth_url and the state cookie pair', async () => {
      const none = await start()
      expect(none.status).toBe(503)
      expect(none.body.error).toMatchObject({ code: 'oauth_unavailable', message: expect.stringContaining('CORRAL_PUBLIC_URL') })
      h.deps.oauth = { publicUrl: PUBLIC_URL, http }
      const res = await start()
      expect(res.status).toBe(200)
      const u = new URL(res.body.auth_url)
      expect(u.searchParams.get('redirect_uri')).toBe(REDIRECT)
      expect(u.searchParams.get('code_challenge_method')).toBe('S256')
      expect(u.searchParams.has('access_type')).toBe(false) // Google's parameter only
      const cookies = [res.headers['set-cookie']].flat() as string[]
      expect(cookies).toHaveLength(2)
      for (const c of cookies) expect(c).toMatch(/^corral_oauth_(state|nonce)=[^;]+; Max-Age=\d+; Path=\/v1\/oauth\/callback; HttpOnly; Secure; SameSite=Lax$/)
      expect(cookies[0]).toContain(`corral_oauth_state=${u.searchParams.get('state')}`)
      expect(res.headers['cache-control']).toBe('no-store')
    })

    it('start: not found, not an OAuth credential; auth:write:own only on the caller\'s own personal credential', async () => {
      expect((await call('POST', '/v1/credentials/cred_nope/oauth/start', { token: org.ownerKey })).status).toBe(404)
      const other = await h.newOrg()
      expect((await call('POST', `/v1/credentials/${credId}/oauth/start`, { token: other.ownerKey })).status).toBe(404)
      const stat = await call('POST', '/v1/credentials', { token: org.ownerKey, body: { name: 'gh', provider: 'github', kind: 'static_token', token: 'ghp_x' } })
      const notOAuth = await call('POST', `/v1/credentials/${stat.body.id}/oauth/start`, { token: org.ownerKey })
      expect(notOAuth.status).toBe(400)
      expect(notOAuth.body.error.code).toBe('validation_error')
      const member = await h.member(org.orgId, 'member')
      const own = await call('POST', `/v1/credentials/${credId}/oauth/start`, { token: member.token })
      expect(own.status).toBe(403)
      expect(own.body.error.code).toBe('permission_denied')
      // A member's own personal OAuth credential: theirs to authorize (the client secret sealed to them), nobody else's with :own.
      const mine = await call('POST', '/v1/credentials', { token: member.token, body: { ...body(), name: 'my-mail', personal: true } })
      expect(mine.status).toBe(201)
      expect(mine.body).toMatchObject({ owner_user_id: member.userId, status: 'pending', kind: 'oauth' })
      const s = await call('POST', `/v1/credentials/${mine.body.id}/oauth/start`, { token: member.token })
      expect(s.status).toBe(200)
      const back = await idp.consent(s.body.auth_url, { account: 'carol' })
      const done = await call('GET', callbackPath(back), { headers: { cookie: cookiesOf(s) } })
      expect(done.body).toMatchObject({ credential: { id: mine.body.id, status: 'active' } })
      const someoneElse = await h.member(org.orgId, 'member')
      const theirs = await call('POST', `/v1/credentials/${mine.body.id}/oauth/start`, { token: someoneElse.token })
      expect(theirs.status).toBe(403)
      expect(theirs.body.error.code).toBe('permission_denied')
      const viewer = await h.key(org.orgId, 'read_only')
      expect((await call('POST', `/v1/credentials/${credId}/oauth/start`, { token: viewer.value })).status).toBe(403)
    })

    it('the callback refuses in the envelope (JSON) or with a page (browser), and changes nothing', async () => {
      const missing = await call('GET', '/v1/oauth/callback?code=x')
      expect(missing.status).toBe(400)
      expect(missing.body.error).toMatchObject({ code: 'oauth_state_invalid', details: { reason: 'state_missing' } })
      expect(missing.body.error.request_id).toBeTruthy()
      const page = await call('GET', '/v1/oauth/callback?code=x&state=unknown', { headers: { accept: 'text/html' } })
      expect(page.status).toBe(400)
      expect(page.headers['content-type']).toMatch(/^text\/html/)
      expect(page.raw).toContain('Not authorized')
      expect(page.raw).toContain('Nothing was changed')
      const s = await start()
      const back = await idp.consent(s.body.auth_url)
      const mismatch = await call('GET', callbackPath(back), { headers: { cookie: 'corral_oauth_state=other; corral_oauth_nonce=n' } })
      expect(mismatch.body.error.details.reason).toBe('cookie_mismatch')
      const denied = await start()
      const no = await idp.consent(denied.body.auth_url, { deny: true })
      const refused = await call('GET', callbackPath(no), { headers: { cookie: cookiesOf(denied) } })
      expect(refused.status).toBe(502)
      expect(refused.body.error).toMatchObject({ code: 'oauth_consent_failed', details: { reason: 'provider_error', provider_error: 'access_denied' } })
      expect(refused.raw).not.toContain('PROVIDER-SECRET-TEXT')
      const row = (await call('GET', '/v1/credentials', { token: org.ownerKey })).body.credentials.find((c: { id: string }) => c.id === credId)
      expect(row.status).toBe('pending')
    })

    it('the callback completes consent without a bearer: JSON to a client, a page to a browser; then state_reused', async () => {
      const s = await start()
      const back = await idp.consent(s.body.auth_url, { account: 'bob' })
      const ok = await call('GET', callbackPath(back), { headers: { cookie: cookiesOf(s) } })
      expect(ok.status).toBe(200)
      expect(ok.body).toEqual({ credential: { id: credId, name: 'outlook', provider: 'microsoft', kind: 'oauth', status: 'active' } })
      expect(([ok.headers['set-cookie']].flat() as string[]).every((c) => /Max-Age=0/.test(c))).toBe(true)
      const again = await call('GET', callbackPath(back), { headers: { cookie: cookiesOf(s) } })
      expect(again.body.error.details.reason).toBe('state_reused')
      const s2 = await start()
      const back2 = await idp.consent(s2.body.auth_url, { account: 'bob' })
      const page = await call('GET', callbackPath(back2), { headers: { accept: 'text/html,application/xhtml+xml', cookie: cookiesOf(s2) } })
      expect(page.status).toBe(200)
      expect(page.raw).toContain('The credential outlook is authorized and active')
      expect(page.headers['content-security-policy']).toBe("default-src 'none'")
      let events: Array<{ user_id: string; detail: Record<string, unknown> }> = []
      for (let i = 0; i < 50 && events.length < 2; i++) {
        const all: typeof events = (await call('GET', '/v1/audit?filter=event_type=credential_authorized&order=asc', { token: org.ownerKey })).body.events
        events = all.filter((e) => e.detail.resource_id === credId)
        if (events.length < 2) await new Promise((r) => setTimeout(r, 20))
      }
      expect(events).toHaveLength(2)
      // Attributed to whoever started the consent (an API key: `system`), with the spec's detail keys.
      expect(events[0]).toMatchObject({ user_id: 'system', detail: { resource_id: credId, name: 'outlook', provider: 'microsoft', kind: 'oauth', scopes: ['openid', 'offline_access'], status: 'active' } })
    })

    it('no response carried the client secret or a token', async () => {
      const all = answers.join('\n')
      expect(all).not.toContain(idp.clientSecret)
      expect(all).not.toMatch(/refresh_token|access_token/)
    })
  })
}
