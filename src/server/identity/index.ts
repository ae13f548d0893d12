// The identity providers a server trusts, picked per token by its `iss` claim.
import { decodeJwt } from 'jose'
import { BuiltinIdentityProvider } from './builtin.js'
import type { IdentityProvider, SessionIdentity } from './provider.js'

export { BuiltinIdentityProvider, BUILTIN_ISSUER, SESSION_AUDIENCE, DEFAULT_SESSION_TTL_SECONDS } from './builtin.js'
export { OidcIdentityProvider, type OidcConfig } from './oidc.js'
export type { IdentityProvider, SessionIdentity } from './provider.js'

export class Identity {
  readonly #byIssuer = new Map<string, IdentityProvider>()

  constructor(
    /** Issues corral's own session tokens (admin user create, tests). */
    readonly builtin: BuiltinIdentityProvider,
    external: IdentityProvider[] = [],
  ) {
    for (const p of [builtin, ...external]) this.#byIssuer.set(p.issuer, p)
  }

  /** Verifies a session JWT with the provider named by its issuer; undefined when nobody vouches for it. */
  async verify(token: string): Promise<SessionIdentity | undefined> {
    let issuer: unknown
    try {
      issuer = decodeJwt(token).iss
    } catch {
      return undefined
    }
    const provider = typeof issuer === 'string' ? this.#byIssuer.get(issuer) : undefined
    if (!provider) return undefined
    try {
      return await provider.verify(token)
    } catch {
      return undefined
    }
  }
}
