// An external OIDC identity provider: sessions are the issuer's JWTs (ID or access tokens),
// verified against its JWKS (fetched and cached by jose, re-fetched on an unknown `kid`). The token
// names the user by an email claim and the org by an org claim; auth/resolve.ts maps both onto a
// corral membership, so an OIDC user must have been invited (or provisioned) in the org first.
import { createRemoteJWKSet, jwtVerify, type JWTVerifyGetKey } from 'jose'
import type { IdentityProvider, SessionIdentity } from './provider.js'

export interface OidcConfig {
  issuer: string
  jwksUrl: string
  audience: string
  /** Claim holding the user's email (default `email`). */
  emailClaim?: string
  /** Claim holding the corral org id or org name (default `org_id`). */
  orgClaim?: string
  /** Accepted signature algorithms (default RS256 and ES256). */
  algorithms?: string[]
}

export class OidcIdentityProvider implements IdentityProvider {
  readonly name = 'oidc'
  readonly issuer: string
  readonly #config: Readonly<Required<OidcConfig>>
  readonly #jwks: JWTVerifyGetKey

  constructor(config: OidcConfig) {
    this.#config = Object.freeze({ emailClaim: 'email', orgClaim: 'org_id', algorithms: ['RS256', 'ES256'], ...config })
    this.issuer = config.issuer
    this.#jwks = createRemoteJWKSet(new URL(config.jwksUrl), { timeoutDuration: 5000, cooldownDuration: 30_000 })
  }

  async verify(token: string): Promise<SessionIdentity> {
    const { payload } = await jwtVerify(token, this.#jwks, {
      issuer: this.#config.issuer,
      audience: this.#config.audience,
      algorithms: this.#config.algorithms,
      requiredClaims: ['exp', 'sub'],
    })
    const email = payload[this.#config.emailClaim]
    const org = payload[this.#config.orgClaim]
    if (typeof email !== 'string' || email === '') throw new Error(`OIDC token lacks the ${this.#config.emailClaim} claim`)
    if (typeof org !== 'string' || org === '') throw new Error(`OIDC token lacks the ${this.#config.orgClaim} claim`)
    return { provider: this.name, org, email: email.toLowerCase(), subject: String(payload.sub) }
  }
}
