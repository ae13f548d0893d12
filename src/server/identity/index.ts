// The identity providers a server trusts, picked per token by its `iss` claim.
import { decodeJwt } from 'jose'
import { generateApiKeySecret } from '../auth/api-key-secret.js'
import { BuiltinIdentityProvider } from './builtin.js'
import type { ApiKeyProvisioner, IdentityProvider, SessionIdentity } from './provider.js'

export { BuiltinIdentityProvider, BUILTIN_ISSUER, SESSION_AUDIENCE, DEFAULT_SESSION_TTL_SECONDS } from './builtin.js'
export { OidcIdentityProvider, type OidcConfig } from './oidc.js'
export type { ApiKeyProvisioner, IdentityProvider, SessionIdentity } from './provider.js'

/** The built-in provisioner: corral is the key store, so revoke at the "provider" is the local delete. */
export const localKeyProvisioner: ApiKeyProvisioner = Object.freeze({
  mint: async () => ({ value: generateApiKeySecret() }),
  revoke: async () => {},
})

export class Identity {
  readonly #byIssuer = new Map<string, IdentityProvider>()

  constructor(
    /** Issues corral's own session tokens (admin user create, tests). */
    readonly builtin: BuiltinIdentityProvider,
    external: IdentityProvider[] = [],
    /** Mints and revokes API-key secrets (spec: through the identity provider). */
    readonly keys: ApiKeyProvisioner = localKeyProvisioner,
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
