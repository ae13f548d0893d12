import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { SignJWT, exportJWK, generateKeyPair } from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { OidcIdentityProvider } from '../../src/server/identity/index.js'
import { createHarness, type Harness } from './harness.js'

// An external OIDC issuer on loopback: its JWKS is served over HTTP, and its tokens become
// corral sessions for invited members (email claim → user, org claim → org id or name).
describe('OIDC sessions through the API', () => {
  const issuer = 'https://login.example.test/'
  let jwks: Server
  let h: Harness
  let privateKey: Awaited<ReturnType<typeof generateKeyPair>>['privateKey']
  const sign = (claims: Record<string, unknown>) =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256', kid: 'oidc-1' })
      .setIssuer(issuer)
      .setAudience('corral-api')
      .setSubject(`idp|${String(claims.email)}`)
      .setIssuedAt()
      .setExpirationTime('5m')
      .sign(privateKey)

  beforeAll(async () => {
    const pair = await generateKeyPair('ES256')
    privateKey = pair.privateKey
    const jwk = { ...(await exportJWK(pair.publicKey)), kid: 'oidc-1', alg: 'ES256', use: 'sig' }
    jwks = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] })))
    await new Promise<void>((r) => jwks.listen(0, '127.0.0.1', r))
    const jwksUrl = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/.well-known/jwks.json`
    h = await createHarness({ externalIdentity: [new OidcIdentityProvider({ issuer, jwksUrl, audience: 'corral-api', algorithms: ['ES256'] })] })
  })
  afterAll(async () => {
    await h.close()
    await new Promise<void>((r) => jwks.close(() => r()))
  })

  it('maps an invited, accepted member by email and org name to a session principal', async () => {
    const { orgId } = await h.newOrg()
    const org = (await h.store.orgs.get(orgId))!
    const email = `oidc-${Date.now()}@example.com`
    const m = await h.member(orgId, 'admin', email)
    for (const orgClaim of [org.name, org.id]) {
      const res = await h.inject('GET', '/v1/me', { token: await sign({ email: email.toUpperCase(), org_id: orgClaim }) })
      expect(res.status).toBe(200)
      expect(res.body).toMatchObject({ kind: 'session', user_id: m.userId, role: 'admin', org: { id: orgId } })
    }
  })

  it('refuses OIDC users without an active membership in the named org', async () => {
    const { orgId } = await h.newOrg()
    const other = await h.newOrg()
    const email = `stranger-${Date.now()}@example.com`
    await h.member(other.orgId, 'member', email)
    expect((await h.inject('GET', '/v1/me', { token: await sign({ email, org_id: orgId }) })).status).toBe(401)
    expect((await h.inject('GET', '/v1/me', { token: await sign({ email: 'nobody@example.com', org_id: orgId }) })).status).toBe(401)
    expect((await h.inject('GET', '/v1/me', { token: await sign({ email, org_id: 'no-such-org' }) })).status).toBe(401)
  })
})
