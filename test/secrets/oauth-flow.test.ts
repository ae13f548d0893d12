// An OAuth credential's whole life against a real OpenID Connect provider (oidc-provider on HTTPS
// loopback, test/helpers/oidc.ts) and the real proxy (test/proxy/harness.ts): created pending by
// discovery, every refused callback changing nothing, consent → active, the minted access token
// placed on a proxied request to a loopback HTTPS upstream, 100 parallel requests → one refresh,
// expiry → refresh with a rotated refresh token stored, a provider outage → auth_unavailable with
// no flip, revocation → a terminal flip audited, re-consent → active again; and no access or
// refresh token in any audit row or any file under the data dir. SQLite and PostgreSQL.
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { AuditEvent } from '../../src/contract/index.js'
import { LeafMinter, loadOrCreateCa } from '../../src/proxy/index.js'
import {
  CREDENTIALS_CHANNEL, NONCE_COOKIE, OAuthCallbackError, OAuthConsent, OAuthHttp, STATE_COOKIE, Sealer, loadMasterKey,
} from '../../src/secrets/index.js'
import { startOidcProvider, type OidcProvider } from '../helpers/oidc.js'
import { testDialects } from '../helpers/dialects.js'
import { startHarness, type Harness } from '../proxy/harness.js'

const PUBLIC_URL = 'https://corral.example.test'
const REDIRECT = `${PUBLIC_URL}/v1/oauth/callback`
const CAPS = `
- name: mail
  type: http
  allow:
    - name: mail
      domains: ["127.0.0.1"]
      methods: [GET]
      paths: ["/mail/*"]
  transforms:
    - name: gmail-auth
      applies_to: [mail]
      auth: { credential: gmail, provider: google }
`

for (const d of testDialects()) describe(`OAuth credential against a real OIDC provider [${d.name}]`, () => {
  let h: Harness
  let idp: OidcProvider
  let consent: OAuthConsent
  let http: OAuthHttp
  let sealer: Sealer
  let ws: { token: string }
  let credId = ''
  const seen: string[] = [] // every Authorization header the upstream received
  const logged: string[] = [] // every line the proxy logged (its faults: refreshes refused, outages)
  const logger = { error: (o: object, m: string) => void logged.push(`${m} ${JSON.stringify(o)}`), warn: (o: object, m: string) => void logged.push(`${m} ${JSON.stringify(o)}`) }
  const actor = () => ({ orgId: h.orgId, userId: h.userId, creatorId: h.userId })
  const url = () => `https://127.0.0.1:${h.up.httpsPort}/mail/inbox`
  const status = async () => (await h.store.proxy.credentials.get(h.orgId, credId))!.status
  const events = (type: string): AuditEvent[] => h.audit.rows.filter((r) => r.event_type === type)
  const lastDecision = async (): Promise<AuditEvent> => {
    const n = h.audit.decisions().length
    return (await h.audit.waitForDecisions(n))[n - 1]!
  }
  /**
   * Drops every cached row and access token of the org in the proxy, as a change announced by the
   * control plane does, and the access token stored on the row for other replicas (as if it had
   * expired); resolves once the announcement came back (Postgres delivers it asynchronously).
   */
  const forget = async () => {
    await h.store.db.updateTable('credential_oauth' as never).set({ access_ciphertext: null, access_refresh_at: null } as never).execute()
    let heard!: () => void
    const back = new Promise<void>((r) => (heard = r))
    const unlisten = await h.store.listen(CREDENTIALS_CHANNEL, (org) => org === h.orgId && heard())
    await h.store.notify(CREDENTIALS_CHANNEL, h.orgId)
    await back
    await unlisten()
  }
  const request = async () => {
    const before = h.audit.decisions().length
    const res = await h.fetch(url(), { token: ws.token })
    const [row] = (await h.audit.waitForDecisions(before + 1)).slice(before)
    return { res, row: row! }
  }
  const startAndConsent = async (o: { account?: string; deny?: boolean } = {}) => {
    const started = await consent.start(actor(), credId)
    const back = await idp.consent(started.authUrl, o)
    return { started, back, cookies: { [STATE_COOKIE]: started.state, [NONCE_COOKIE]: started.nonce } }
  }
  const query = (u: URL) => Object.fromEntries(u.searchParams)

  beforeAll(async () => {
    // The provider is on loopback: the operator's opt-in for it (docs/credentials.md), for the proxy's minting too.
    h = await startHarness({ store: await d.open(), logger, env: { CORRAL_OAUTH_ALLOW_PRIVATE: '127.0.0.1' } })
    h.up.handler.current = (req, res) => {
      seen.push(String(req.headers.authorization ?? ''))
      res.end('{"mail":[]}')
    }
    const ca = await loadOrCreateCa(join(h.dir, 'upstream-ca'))
    idp = await startOidcProvider({ tls: await new LeafMinter(ca).pemFor('127.0.0.1'), caPem: ca.certPem, redirectUri: REDIRECT })
    sealer = new Sealer(await loadMasterKey(join(h.dir, 'data')))
    http = new OAuthHttp({ extraCaPem: [h.up.caPem], allowPrivate: ['127.0.0.1/32'] })
    consent = new OAuthConsent({ store: h.store, sealer, audit: h.audit, http, publicUrl: PUBLIC_URL, isOAuthProvider: (p) => p === 'google' || p === 'microsoft' })
    ws = await h.workspace(CAPS)
  })
  afterAll(async () => {
    await http?.close()
    await idp?.close()
    await h?.close()
  })

  it('creates the credential pending, its endpoints discovered from the issuer', async () => {
    const base = { name: 'gmail', provider: 'google', client_id: idp.clientId, client_secret: idp.clientSecret, scopes: ['openid', 'offline_access'] }
    await expect(consent.create(actor(), { ...base, provider: 'github' })).rejects.toMatchObject({ field: 'provider' })
    await expect(consent.create(actor(), { ...base, issuer: 'http://127.0.0.1:1' })).rejects.toMatchObject({ field: 'issuer' })
    await expect(consent.create(actor(), { ...base, issuer: 'https://127.0.0.1:1' })).rejects.toMatchObject({ field: 'issuer' })
    await expect(consent.create(actor(), { ...base, issuer: idp.issuer, scopes: [] })).rejects.toMatchObject({ field: 'scopes' })
    const meta = await consent.create(actor(), { ...base, issuer: idp.issuer })
    credId = meta.id
    expect(meta).toMatchObject({ name: 'gmail', provider: 'google', kind: 'oauth', status: 'pending', scopes: ['openid', 'offline_access'] })
    expect(await h.store.oauth.client(h.orgId, credId)).toMatchObject({ issuer: idp.issuer, token_endpoint: `${idp.issuer}/token`, refresh_ciphertext: null })
    expect(events('credential_created').at(-1)!.detail).toEqual({ resource_id: credId, name: 'gmail', provider: 'google', kind: 'oauth', scopes: ['openid', 'offline_access'], status: 'pending' })
    await expect(consent.create(actor(), { ...base, issuer: idp.issuer })).rejects.toMatchObject({ field: 'name', kind: 'conflict' })
  })

  it('a pending credential is not minted: auth_unavailable, the request still goes', async () => {
    const { res, row } = await request()
    expect(res.status).toBe(200)
    expect(seen.at(-1)).toBe('')
    expect(row).toMatchObject({ decision: 'allow', auth_used: [], auth_failures: { gmail: 'auth_unavailable' }, transforms_failed: { 'gmail-auth': 'auth_unavailable' } })
  })

  it('start: the authorize URL carries state, client id, scope, redirect URI and an S256 PKCE challenge', async () => {
    const started = await consent.start(actor(), credId)
    const u = new URL(started.authUrl)
    expect(u.origin + u.pathname).toBe(`${idp.issuer}/auth`)
    expect(Object.fromEntries(u.searchParams)).toMatchObject({
      client_id: idp.clientId, scope: 'openid offline_access', redirect_uri: REDIRECT, state: started.state, response_type: 'code',
      code_challenge_method: 'S256', prompt: 'consent', access_type: 'offline',
    })
    expect(u.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(started.state).not.toBe(started.nonce)
  })

  it('every refused callback names its reason and changes nothing', async () => {
    const refused = async (p: Promise<unknown>, reason: string) => {
      const err = await p.then(() => undefined, (e: unknown) => e)
      expect(err).toBeInstanceOf(OAuthCallbackError)
      expect((err as OAuthCallbackError).reason).toBe(reason)
      expect((err as Error).message).not.toContain('PROVIDER-SECRET-TEXT')
    }
    await refused(consent.callback({ code: 'x' }, {}), 'state_missing')
    await refused(consent.callback({ code: 'x', state: 'never-issued' }, {}), 'state_unknown')
    const a = await startAndConsent()
    await refused(consent.callback(query(a.back), { ...a.cookies, [NONCE_COOKIE]: 'another-browser' }), 'cookie_mismatch')
    await refused(consent.callback(query(a.back), { [STATE_COOKIE]: 'other-state' }), 'cookie_mismatch')
    const b = await startAndConsent()
    await refused(consent.callback({ ...query(b.back), code: 'forged-code' }, b.cookies), 'exchange_refused')
    await refused(consent.callback(query(b.back), b.cookies), 'state_reused')
    const denied = await startAndConsent({ deny: true })
    expect(denied.back.searchParams.get('error')).toBe('access_denied')
    await refused(consent.callback(query(denied.back), denied.cookies), 'provider_error')
    const quick = new OAuthConsent({ store: h.store, sealer, audit: h.audit, http, publicUrl: PUBLIC_URL, isOAuthProvider: () => true, stateTtlMs: 0 })
    const c = await quick.start(actor(), credId)
    await refused(quick.callback({ code: 'x', state: c.state }, {}), 'state_expired')
    expect(await status()).toBe('pending')
    expect((await h.store.oauth.client(h.orgId, credId))!.refresh_ciphertext).toBeNull()
    expect(events('credential_authorized')).toHaveLength(0)
  })

  it('consent → callback → active, audited with the spec detail keys', async () => {
    const { back, cookies } = await startAndConsent()
    const meta = await consent.callback(query(back), cookies)
    expect(meta.status).toBe('active')
    expect(await status()).toBe('active')
    expect(events('credential_authorized').at(-1)).toMatchObject({
      user_id: h.userId, actor: 'control-plane', category: 'audit',
      detail: { resource_id: credId, name: 'gmail', provider: 'google', kind: 'oauth', scopes: ['openid', 'offline_access'], status: 'active' },
    })
  })

  it('the proxy places a minted access token (Bearer) on a request to a loopback HTTPS upstream', async () => {
    await forget()
    const before = idp.tokenRequests.refresh_token ?? 0
    const { res, row } = await request()
    expect(res.status).toBe(200)
    const token = seen.at(-1)!.replace(/^Bearer /, '')
    expect(seen.at(-1)).toMatch(/^Bearer .{20,}/)
    expect(await idp.accessTokenValid(token)).toBe(true)
    expect(row).toMatchObject({ decision: 'allow', auth_used: ['gmail'], auth_failures: {}, transforms_failed: {} })
    expect(idp.tokenRequests.refresh_token).toBe(before + 1)
    await request() // cached: no second refresh
    expect(idp.tokenRequests.refresh_token).toBe(before + 1)
  })

  it('100 parallel requests on a cold cache cause one refresh', async () => {
    await forget()
    const before = idp.tokenRequests.refresh_token ?? 0
    const from = seen.length
    const n = h.audit.decisions().length
    await Promise.all(Array.from({ length: 100 }, () => h.fetch(url(), { token: ws.token })))
    await h.audit.waitForDecisions(n + 100)
    expect(idp.tokenRequests.refresh_token).toBe(before + 1)
    expect(new Set(seen.slice(from)).size).toBe(1)
    expect(seen.at(-1)).toMatch(/^Bearer /)
  })

  it('an expiring token is refreshed, and each rotated refresh token is stored', async () => {
    idp.accessTtl = 2
    await forget()
    const g0 = (await h.store.oauth.client(h.orgId, credId))!
    await request()
    const first = seen.at(-1)
    const g1 = (await h.store.oauth.client(h.orgId, credId))!
    expect(g1.generation).toBe(g0.generation + 1)
    expect(g1.refresh_ciphertext).not.toBe(g0.refresh_ciphertext)
    // The 2 s token is refreshed once under half its lifetime is left.
    const end = Date.now() + 10_000
    while (seen.at(-1) === first && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 250))
      await request()
    }
    expect(seen.at(-1)).not.toBe(first)
    expect((await h.store.oauth.client(h.orgId, credId))!.generation).toBe(g1.generation + 1)
    expect(await status()).toBe('active')
    idp.accessTtl = 3600
  })

  it('a provider outage is auth_unavailable on the request, with no flip', async () => {
    idp.outage = true
    await forget()
    const { res, row } = await request()
    idp.outage = false
    expect(res.status).toBe(200)
    expect(row).toMatchObject({ auth_used: [], auth_failures: { gmail: 'auth_unavailable' } })
    expect(await status()).toBe('active')
    expect(events('credential_status')).toHaveLength(0)
    expect(JSON.stringify(row)).not.toContain('PROVIDER-SECRET-TEXT')
  })

  it('revocation at the provider flips the credential (terminal, audited once) and the request gets auth_unavailable', async () => {
    await idp.revoke('alice')
    await forget()
    const { row } = await request()
    expect(row).toMatchObject({ auth_used: [], auth_failures: { gmail: 'auth_unavailable' }, transforms_failed: { 'gmail-auth': 'auth_unavailable' } })
    expect(await status()).toBe('revoked')
    await request()
    const flips = events('credential_status')
    expect(flips).toHaveLength(1)
    expect(flips[0]).toMatchObject({
      actor: 'policy-engine', category: 'audit',
      detail: { resource_id: credId, name: 'gmail', provider: 'google', kind: 'oauth', from_status: 'active', to_status: 'revoked', reason: 'invalid_grant', terminal: true },
    })
    expect(Object.keys(flips[0]!.detail!).sort()).toEqual(['from_status', 'kind', 'name', 'provider', 'reason', 'resource_id', 'terminal', 'to_status'])
  })

  it('re-consent brings it back to active, audited again, and the proxy mints from the new grant', async () => {
    const { back, cookies } = await startAndConsent()
    await consent.callback(query(back), cookies)
    expect(await status()).toBe('active')
    expect(events('credential_status').at(-1)!.detail).toMatchObject({ from_status: 'revoked', to_status: 'active', reason: 'reauthorized', terminal: false })
    expect(events('credential_authorized')).toHaveLength(2)
    // The control plane announced the change; the next request mints from the new refresh token.
    await h.audit.waitForDecisions(0)
    const { row } = await request()
    expect(row).toMatchObject({ auth_used: ['gmail'], auth_failures: {} })
    expect(await idp.accessTokenValid(seen.at(-1)!.replace(/^Bearer /, ''))).toBe(true)
  })

  it('no access or refresh token in any audit row, log line or file under the data dir', async () => {
    const row = (await h.store.oauth.client(h.orgId, credId))!
    const refresh = sealer.open(row.refresh_ciphertext!, `oauth-refresh:${h.orgId}:${credId}`)
    const tokens = [...new Set(seen.filter(Boolean).map((s) => s.replace(/^Bearer /, '')))]
    expect(tokens.length).toBeGreaterThan(2)
    const secrets = [refresh, idp.clientSecret, ...tokens]
    const audit = JSON.stringify(h.audit.rows)
    for (const s of secrets) expect(audit).not.toContain(s)
    const log = logged.join('\n')
    for (const s of secrets) expect(log).not.toContain(s)
    for (const file of await walk(h.dir)) {
      const text = (await readFile(file)).toString('latin1')
      for (const s of secrets) expect(text.includes(s), `${file} holds a token`).toBe(false)
    }
  })
})

async function walk(dir: string): Promise<string[]> {
  const out: string[] = []
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    if (e.isDirectory()) out.push(...(await walk(p)))
    else if (e.isFile()) out.push(p)
  }
  return out
}
