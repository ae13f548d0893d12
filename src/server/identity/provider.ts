// The identity-provider seam. A session token is a signed JWT; whoever signed it (corral's
// built-in provider, or an external OIDC issuer) verifies it and says who the caller is. The auth
// hook picks the provider by the token's `iss` claim, then maps the identity onto an org
// membership in the store (auth/resolve.ts), so every provider yields the same Principal.

/** What a verified session token asserts. */
export interface SessionIdentity {
  provider: string
  /** The org the session is for: a corral org id, or (OIDC) an org id or name from a claim. */
  org: string
  /** A corral user id (built-in provider) … */
  userId?: string
  /** … or an email to look the user up by (OIDC). */
  email?: string
  /** The issuer's subject claim, kept for attribution of webhook-driven events. */
  subject: string
}

export interface IdentityProvider {
  readonly name: string
  /** The `iss` value this provider's tokens carry. */
  readonly issuer: string
  /** Verifies signature, issuer, audience and expiry; throws (any error) when the token is not valid. */
  verify(token: string): Promise<SessionIdentity>
}

/**
 * Where API-key secrets come from (spec: keys are created "through the identity provider" and
 * mirrored locally). The built-in provisioner mints them itself; an external provider's would call
 * its management API. corral stores only the hash and the public columns either way.
 */
export interface ApiKeyProvisioner {
  /** Mints the secret of a new key. */
  mint(orgId: string, input: { label: string; permission_set: string }): Promise<{ value: string }>
  /** Deletes the key at the provider; resolves when it is gone, including when it was already absent. */
  revoke(orgId: string, keyId: string): Promise<void>
}
