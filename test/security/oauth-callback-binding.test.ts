// The login-CSRF shape of OAuth (RFC 6749 §10.12, RFC 9700 §4.7): a consent one person starts
// must not be finished in another person's browser, or the second person's grant lands in the
// first one's credential. A browser finishes only with the state cookie pair `oauth/start` set in
// it; a client without cookies (the CLI) names a loopback address at start, holds the binding
// secret, and finishes with it over its own authenticated connection. Each shape against the real
// app, a real OIDC provider and both dialects: no cookies, the wrong nonce, the state cookie alone,
// another flow's pair, a replayed callback, the attacker's personal credential finished in the
// victim's browser; for the CLI's binding: the loopback address (only a loopback IP literal), no
// cookies set, the callback only passing the parameters on, a wrong or another user's binding,
// a browser flow's nonce, and a replayed completion. Every refusal leaves the credential as it was.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LeafMinter, loadOrCreateCa } from '../../src/proxy/index.js'
import { OAuthHttp, Sealer } from '../../src/secrets/index.js'
import { testDialects } from '../helpers/dialects.js'
import { startOidcProvider, type OidcProvider } from '../helpers/oidc.js'
import { createHarness, type Harness } from '../server/harness.js'

const PUBLIC_URL = 'https://corral.example.test'
const LOOPBACK = 'http://127.0.0.1:53682/callback'

for (const d of testDialects()) describe(`OAuth consent is finished only by whoever started it [${d.name}]`, () => {
  let h: Harness
  let idp: OidcProvider
  let http: OAuthHttp
  let dir: string
  let org: Awaited<ReturnType<Harness['newOrg']>>

  const cookiesOf = (res: { headers: Record<string, unknown> }) => ([res.headers['set-cookie']].flat().filter(Boolean) as string[]).map((c) => c.split(';')[0]).join('; ')
  const callback = (back: URL, cookie?: string) => h.inject('GET', `/v1/oauth/callback${back.search}`, cookie === undefined ? {} : { headers: { cookie } })
  const credential = async (id: string) => (await h.inject('GET', `/v1/credentials/${id}`, { token: org.ownerKey })).body as { status: string; updated_at: string }
  const authorizedEvents = async () => (await h.inject('GET', '/v1/audit?filter=event_type=credential_authorized', { token: org.ownerKey })).body.events.length as number
  const create = async (token: string, name: string, personal = false) => {
    const r = await h.inject('POST', '/v1/credentials', {
      token, body: { name, provider: 'google', kind: 'oauth', issuer: idp.issuer, client_id: idp.clientId, client_secret: idp.clientSecret, scopes: ['openid', 'offline_access'], ...(personal ? { personal } : {}) },
    })
    expect(r.status, r.raw).toBe(201)
    return r.body.id as string
  }
  const start = (token: string, id: string, loopback?: string) =>
    h.inject('POST', `/v1/credentials/${id}/oauth/start`, { token, ...(loopback === undefined ? {} : { body: { loopback_uri: loopback } }) })
  const refused = (res: { status: number; body: any }, reason: string) => {
    expect(res.status, JSON.stringify(res.body)).toBe(400)
    expect(res.body.error).toMatchObject({ code: 'oauth_state_invalid', details: { reason } })
  }

  beforeAll(async () => {
    h = await createHarness({ open: d.open, sealer: new Sealer(Buffer.alloc(32, 5)) })
    dir = mkdtempSync(join(tmpdir(), 'corral-oauth-binding-'))
    const ca = await loadOrCreateCa(dir)
    idp = await startOidcProvider({ tls: await new LeafMinter(ca).pemFor('127.0.0.1'), caPem: ca.certPem, redirectUri: `${PUBLIC_URL}/v1/oauth/callback` })
    http = new OAuthHttp({ extraCaPem: [ca.certPem], allowPrivate: ['127.0.0.1/32'] }) // the provider is on loopback: the operator's opt-in
    h.deps.oauth = { publicUrl: PUBLIC_URL, http }
    org = await h.newOrg()
  })
  afterAll(async () => {
    await h?.close()
    await http?.close()
    await idp?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('a browser callback without the state cookies, with the wrong nonce, the state cookie alone or another flow\'s pair is refused and changes nothing', async () => {
    const id = await create(org.ownerKey, 'mail')
    const a = await start(org.ownerKey, id)
    const b = await start(org.ownerKey, id) // another flow, in another browser
    const back = await idp.consent(a.body.auth_url)
    const state = new URL(a.body.auth_url).searchParams.get('state')!
    refused(await callback(back), 'cookie_missing')
    refused(await callback(back, `corral_oauth_state=${state}; corral_oauth_nonce=forged`), 'cookie_mismatch')
    refused(await callback(back, `corral_oauth_state=${state}`), 'cookie_mismatch')
    refused(await callback(back, cookiesOf(b)), 'cookie_mismatch')
    const page = await h.inject('GET', `/v1/oauth/callback${back.search}`, { headers: { accept: 'text/html' } })
    expect(page.status).toBe(400)
    expect(page.raw).toContain('did not start this consent')
    expect((await credential(id)).status).toBe('pending')
    expect(await authorizedEvents()).toBe(0)
    // The browser that started it still can (nothing was claimed by the refusals); then never again.
    const ok = await callback(back, cookiesOf(a))
    expect(ok.body).toMatchObject({ credential: { id, status: 'active' } })
    refused(await callback(back, cookiesOf(a)), 'state_reused')
    refused(await callback(back), 'state_reused')
    expect(await authorizedEvents()).toBe(1)
  })

  it('a member\'s consent finished in another member\'s browser does not put that person\'s grant in the member\'s credential', async () => {
    const attacker = await h.member(org.orgId, 'member')
    const victim = await h.member(org.orgId, 'member')
    const id = await create(attacker.token, 'their-mail', true)
    const s = await start(attacker.token, id)
    // The victim opens the attacker's authorize URL and consents as themself; their browser holds no
    // cookie of this consent (or only cookies of a consent of their own).
    const back = await idp.consent(s.body.auth_url, { account: 'victim' })
    refused(await callback(back), 'cookie_missing')
    const own = await create(victim.token, 'victim-mail', true)
    const theirs = await start(victim.token, own)
    refused(await callback(back, cookiesOf(theirs)), 'cookie_mismatch')
    expect((await credential(id)).status).toBe('pending')
    // Through the CLI's path neither: the victim cannot complete what the attacker's client started.
    const cli = await start(attacker.token, id, LOOPBACK)
    const back2 = await idp.consent(cli.body.auth_url, { account: 'victim' })
    const done = await h.inject('POST', `/v1/credentials/${id}/oauth/complete`, { token: victim.token, body: { binding: cli.body.binding, query: Object.fromEntries(back2.searchParams) } })
    expect(done.status).toBe(403) // not theirs to reach
    expect((await credential(id)).status).toBe('pending')
  })

  it('the CLI\'s start names a loopback IP address, gets a binding and no cookies; the callback only passes the parameters on', async () => {
    const id = await create(org.ownerKey, 'cli-mail')
    for (const bad of ['http://localhost:53682/callback', 'https://127.0.0.1:53682/', 'http://evil.example:53682/', 'http://127.0.0.1/callback', 'http://127.0.0.1:1/?x=1', 'http://u:p@127.0.0.1:1/', 'not a url']) {
      const r = await start(org.ownerKey, id, bad)
      expect(r.status, bad).toBe(400)
      expect(r.body.error.details.fields).toHaveProperty('loopback_uri')
    }
    const s = await start(org.ownerKey, id, LOOPBACK)
    expect(s.status).toBe(200)
    expect(s.body.binding).toMatch(/^[A-Za-z0-9_-]{40,}$/)
    expect(s.headers['set-cookie']).toBeUndefined()
    const back = await idp.consent(s.body.auth_url)
    const hop = await callback(back)
    expect(hop.status).toBe(303)
    const location = new URL(String(hop.headers.location))
    expect(location.origin + location.pathname).toBe(LOOPBACK)
    expect(Object.fromEntries(location.searchParams)).toEqual(Object.fromEntries(back.searchParams))
    expect((await credential(id)).status).toBe('pending')
    // A cookie pair (some other consent's) does not pass it on, nor finish it.
    const other = await start(org.ownerKey, id)
    refused(await callback(back, cookiesOf(other)), 'cookie_mismatch')
    expect((await callback(back)).status).toBe(303) // still unclaimed
  })

  it('the CLI finishes only with its binding, as the user who started, once', async () => {
    const id = await create(org.ownerKey, 'cli-mail-2')
    const s = await start(org.ownerKey, id, LOOPBACK)
    const query = Object.fromEntries((await idp.consent(s.body.auth_url)).searchParams)
    const complete = (token: string, binding: string, q = query, cred = id) => h.inject('POST', `/v1/credentials/${cred}/oauth/complete`, { token, body: { binding, query: q } })
    refused(await complete(org.ownerKey, 'a-guessed-binding-value'), 'binding_mismatch')
    const admin = await h.member(org.orgId, 'admin')
    refused(await complete(admin.token, s.body.binding), 'binding_mismatch') // another user, even with the secret
    const elsewhere = await create(org.ownerKey, 'cli-mail-3')
    refused(await complete(org.ownerKey, s.body.binding, query, elsewhere), 'binding_mismatch') // another credential
    // A browser flow's nonce is not a binding: a cookie consent is finished by its browser only.
    const browser = await start(org.ownerKey, id)
    const nonce = /corral_oauth_nonce=([^;]+)/.exec(cookiesOf(browser))![1]!
    const bq = Object.fromEntries((await idp.consent(browser.body.auth_url)).searchParams)
    refused(await complete(org.ownerKey, nonce, bq), 'binding_mismatch')
    expect((await credential(id)).status).toBe('pending')
    const ok = await complete(org.ownerKey, s.body.binding)
    expect(ok.status, ok.raw).toBe(200)
    expect(ok.body).toMatchObject({ credential: { id, status: 'active' } })
    refused(await complete(org.ownerKey, s.body.binding), 'state_reused')
    refused(await callback(new URL(`${PUBLIC_URL}/v1/oauth/callback?${new URLSearchParams(query)}`)), 'state_reused')
  })
})
