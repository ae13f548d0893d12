import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { SignJWT, exportJWK, generateKeyPair } from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BUILTIN_ISSUER, BuiltinIdentityProvider, Identity, OidcIdentityProvider, SESSION_AUDIENCE } from '../../src/server/identity/index.js'

/** Settings as the store keeps them: first writer wins. */
function memorySettings() {
  const map = new Map<string, string>()
  return {
    async setIfAbsent(key: string, value: string) {
      if (!map.has(key)) map.set(key, value)
      return map.get(key)!
    },
  }
}

describe(BuiltinIdentityProvider.name, () => {
  it('issues tokens that it (and every replica sharing the settings) verifies', async () => {
    const settings = memorySettings()
    const a = await BuiltinIdentityProvider.open(settings)
    const b = await BuiltinIdentityProvider.open(settings)
    const token = await a.issue({ userId: 'usr_1', orgId: 'org_1' })
    await expect(b.verify(token)).resolves.toMatchObject({ provider: 'builtin', org: 'org_1', userId: 'usr_1' })
  })

  it('refuses expired, forged and foreign tokens', async () => {
    const mine = await BuiltinIdentityProvider.open(memorySettings())
    const other = await BuiltinIdentityProvider.open(memorySettings())
    const identity = new Identity(mine)
    const expired = await mine.issue({ userId: 'usr_1', orgId: 'org_1' }, -10)
    expect(await identity.verify(expired)).toBeUndefined()
    const forged = await other.issue({ userId: 'usr_1', orgId: 'org_1' })
    expect(await identity.verify(forged)).toBeUndefined()
    const good = await mine.issue({ userId: 'usr_1', orgId: 'org_1' })
    const [h, p, s] = good.split('.')
    const tampered = [h, Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(p, 'base64url').toString()), sub: 'usr_2' })).toString('base64url'), s].join('.')
    expect(await identity.verify(tampered)).toBeUndefined()
    expect(await identity.verify('not-a-jwt')).toBeUndefined()
    expect(await identity.verify(good)).toMatchObject({ userId: 'usr_1' })
  })
})

describe(OidcIdentityProvider.name, () => {
  let server: Server
  let jwksUrl: string
  let sign: (claims: Record<string, unknown>, opts?: { iss?: string; aud?: string; exp?: number }) => Promise<string>
  const issuer = 'https://idp.example.test'

  beforeAll(async () => {
    const { privateKey, publicKey } = await generateKeyPair('RS256')
    const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' }
    server = createServer((req, res) => {
      res.setHeader('content-type', 'application/json')
      res.end(JSON.stringify({ keys: [jwk] }))
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    jwksUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks.json`
    sign = (claims, opts = {}) =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
        .setIssuer(opts.iss ?? issuer)
        .setAudience(opts.aud ?? 'corral')
        .setSubject('idp-user-1')
        .setIssuedAt()
        .setExpirationTime(opts.exp ?? Math.floor(Date.now() / 1000) + 300)
        .sign(privateKey)
  })
  afterAll(() => new Promise<void>((r) => server.close(() => r())))

  it('verifies against the issuer JWKS and maps email and org claims', async () => {
    const identity = new Identity(await BuiltinIdentityProvider.open(memorySettings()), [new OidcIdentityProvider({ issuer, jwksUrl, audience: 'corral' })])
    const token = await sign({ email: 'Ana@Example.com', org_id: 'acme' })
    expect(await identity.verify(token)).toEqual({ provider: 'oidc', org: 'acme', email: 'ana@example.com', subject: 'idp-user-1' })
  })

  it('refuses a wrong audience, an expired token, a missing claim and an unknown issuer', async () => {
    const identity = new Identity(await BuiltinIdentityProvider.open(memorySettings()), [new OidcIdentityProvider({ issuer, jwksUrl, audience: 'corral' })])
    expect(await identity.verify(await sign({ email: 'a@b.c', org_id: 'acme' }, { aud: 'someone-else' }))).toBeUndefined()
    expect(await identity.verify(await sign({ email: 'a@b.c', org_id: 'acme' }, { exp: Math.floor(Date.now() / 1000) - 120 }))).toBeUndefined()
    expect(await identity.verify(await sign({ org_id: 'acme' }))).toBeUndefined()
    expect(await identity.verify(await sign({ email: 'a@b.c', org_id: 'acme' }, { iss: 'https://evil.test' }))).toBeUndefined()
  })

  it('does not let a token claiming the built-in issuer pass with the OIDC key', async () => {
    const identity = new Identity(await BuiltinIdentityProvider.open(memorySettings()), [new OidcIdentityProvider({ issuer, jwksUrl, audience: 'corral' })])
    expect(await identity.verify(await sign({ org_id: 'org_1' }, { iss: BUILTIN_ISSUER, aud: SESSION_AUDIENCE }))).toBeUndefined()
  })
})
