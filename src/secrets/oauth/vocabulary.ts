// The words the OAuth files share: the credential kind, what its sealed material holds, the
// status names (docs/credentials.md "OAuth credentials": the state machine), the binding a
// refresh token is sealed to, and a stored row's endpoints as the client reads them.
import type { OAuthClientRow } from '../../store/index.js'
import type { OAuthEndpoints } from './client.js'

export const OAUTH_KIND = 'oauth'

/** The statuses of an OAuth credential; static kinds are always `active`. */
export const OAUTH_STATUSES = ['pending', 'active', 'revoked'] as const
export type OAuthStatus = (typeof OAUTH_STATUSES)[number]

/** A credential of kind oauth seals its client secret as its material; the refresh token is sealed apart (it rotates). */
export interface OAuthMaterial { client_secret: string }

/** A refresh token is bound to its credential's id: copied to another row, it does not decrypt. */
export const refreshBinding = (orgId: string, credentialId: string): string => `oauth-refresh:${orgId}:${credentialId}`

/** An access token shared through the row is bound to the credential and the grant generation it came from. */
export const accessBinding = (orgId: string, credentialId: string, generation: number): string => `oauth-access:${orgId}:${credentialId}:${generation}`

export function oauthEndpoints(row: OAuthClientRow): OAuthEndpoints {
  return {
    issuer: row.issuer, authorization_endpoint: row.authorization_endpoint, token_endpoint: row.token_endpoint,
    ...(row.metadata ? { metadata: row.metadata } : {}),
  }
}
