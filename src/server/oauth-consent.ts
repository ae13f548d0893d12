// The OAuth consent service (src/secrets/oauth/) built from the server's dependencies, for the
// credentials route (kind oauth) and the consent routes (routes/oauth.ts).
import { apiError, type ErrorCode } from '../contract/index.js'
import { AUTH_PROVIDERS, isAuthProvider } from '../policy/index.js'
import { OAuthConsent, OAuthHttp } from '../secrets/index.js'
import type { ServerDeps } from './types.js'

export const isOAuthProvider = (slug: string): boolean => isAuthProvider(slug) && AUTH_PROVIDERS[slug].family === 'oauth'
const fallbackHttp = new OAuthHttp()

/** The OAuth consent service over this server's parts; oauth_unavailable without a master key. */
export function oauthConsent(deps: ServerDeps, unavailable: ErrorCode = 'service_unavailable'): OAuthConsent {
  if (!deps.sealer) throw apiError(unavailable, 'secret storage is not configured on this server (no master key was given to it)')
  return new OAuthConsent({
    store: deps.store, sealer: deps.sealer, audit: deps.audit, http: deps.oauth?.http ?? fallbackHttp,
    publicUrl: deps.oauth?.publicUrl, isOAuthProvider,
  })
}

