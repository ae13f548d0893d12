// The built-in identity provider: corral signs its own session tokens (ES256 JWTs with an expiry).
// The key pair is generated once and kept in the store's settings with first-writer-wins, so every
// replica sharing a database signs and verifies with the same key.
import { SignJWT, exportJWK, generateKeyPair, importJWK, jwtVerify, type JWK } from 'jose'
import type { IdentityProvider, SessionIdentity } from './provider.js'

type Key = Awaited<ReturnType<typeof importJWK>>

export const BUILTIN_ISSUER = 'urn:corral:identity'
export const SESSION_AUDIENCE = 'urn:corral:api'
const SETTINGS_KEY = 'identity.session_signing_key'
const ALG = 'ES256'
export const DEFAULT_SESSION_TTL_SECONDS = 12 * 60 * 60

/** The slice of the store's settings repository this module needs. */
export interface SettingsLike {
  setIfAbsent(key: string, value: string): Promise<string>
}

export class BuiltinIdentityProvider implements IdentityProvider {
  readonly name = 'builtin'
  readonly issuer = BUILTIN_ISSUER
  readonly #privateKey: Key
  readonly #publicKey: Key
  readonly #kid: string

  private constructor(privateKey: Key, publicKey: Key, kid: string) {
    this.#privateKey = privateKey
    this.#publicKey = publicKey
    this.#kid = kid
  }

  /** Loads the signing key from settings, creating it on first use (race-free via setIfAbsent). */
  static async open(settings: SettingsLike): Promise<BuiltinIdentityProvider> {
    const { privateKey } = await generateKeyPair(ALG, { extractable: true })
    const candidate = await exportJWK(privateKey)
    candidate.kid = `sk_${Date.now().toString(36)}`
    const stored = JSON.parse(await settings.setIfAbsent(SETTINGS_KEY, JSON.stringify(candidate))) as JWK
    const priv = (await importJWK({ ...stored, alg: ALG }, ALG)) as Key
    const { d: _d, ...pub } = stored
    const pubKey = (await importJWK({ ...pub, alg: ALG }, ALG)) as Key
    return new BuiltinIdentityProvider(priv, pubKey, stored.kid ?? 'corral')
  }

  /** Issues a session token for a member of an org. */
  async issue(user: { userId: string; orgId: string }, ttlSeconds = DEFAULT_SESSION_TTL_SECONDS): Promise<string> {
    return new SignJWT({ org_id: user.orgId })
      .setProtectedHeader({ alg: ALG, kid: this.#kid, typ: 'JWT' })
      .setIssuer(BUILTIN_ISSUER)
      .setAudience(SESSION_AUDIENCE)
      .setSubject(user.userId)
      .setIssuedAt()
      .setExpirationTime(Math.floor(Date.now() / 1000) + ttlSeconds)
      .sign(this.#privateKey)
  }

  async verify(token: string): Promise<SessionIdentity> {
    const { payload } = await jwtVerify(token, this.#publicKey, {
      issuer: BUILTIN_ISSUER,
      audience: SESSION_AUDIENCE,
      algorithms: [ALG],
      requiredClaims: ['exp', 'sub'],
    })
    if (typeof payload.org_id !== 'string' || typeof payload.sub !== 'string') throw new Error('session token lacks org_id/sub')
    return { provider: this.name, org: payload.org_id, userId: payload.sub, subject: payload.sub }
  }
}
