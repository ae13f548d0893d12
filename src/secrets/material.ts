// What org material is, as the rest of corral sees it: the credential kinds, what a credential's
// sealed material decodes to, a minted credential, and the two read interfaces the proxy consumes
// (secrets by name, credentials by minting). Also the store bus channels on which the control
// plane announces a change (payload: org id) so every proxy process drops its cached copy.

export const SECRETS_CHANNEL = 'corral_secrets'
export const CREDENTIALS_CHANNEL = 'corral_credentials'

export const CREDENTIAL_KINDS = ['static_token', 'basic_auth', 'query_key'] as const
export type CredentialKind = (typeof CREDENTIAL_KINDS)[number]

/** What a credential's sealed material decodes to. */
export interface CredentialMaterial { token?: string; username?: string; password?: string }

/** A credential value ready to be placed into a request; never logged, audited or echoed. */
export interface MintedCredential {
  /** `oauth`: `secret` is an access token minted from the credential's refresh token. */
  kind: CredentialKind | 'oauth'
  /** Provider slug the credential was created for. */
  provider?: string
  /** static_token / query_key: the token; basic_auth: the password; oauth: the access token. */
  secret: string
  username?: string
}

/**
 * Turns a stored credential into its value; `undefined` when it cannot be minted. `owner`: the
 * workspace creator's user id, whose personal credential of that name is chosen over the org's.
 */
export interface CredentialBroker {
  /** A promise only when it must wait (a read of the store, an OAuth token): a cached credential answers at once. */
  mint(orgId: string, credentialName: string, provider: string, owner?: string): MintedCredential | undefined | Promise<MintedCredential | undefined>
}

/** A secret's value by name (synchronous: transforms read it while evaluating). */
export type SecretLookup = (name: string) => string | undefined

/** Secrets of an org, readable synchronously by transforms. */
export interface SecretsSource {
  lookupFor(orgId: string): SecretLookup
  /** Warm the org's secrets before its first request (activation), so lookups stay synchronous; no promise when they are warm. */
  load(orgId: string): Promise<void> | undefined
}
