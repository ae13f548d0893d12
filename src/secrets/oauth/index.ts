// OAuth authorization-code credentials (docs/credentials.md "OAuth credentials"): the client over
// openid-client (client.ts), the control plane's create / start / callback (consent.ts), the
// proxy's access-token minting (minter.ts) and their shared words (vocabulary.ts).
export {
  OAuthHttp, ProviderAddressRefused, TerminalOAuthError, TransientOAuthError, TERMINAL_OAUTH_ERRORS, OAUTH_ALLOW_PRIVATE_ENV, oauthAllowPrivate,
  type OAuthHttpOptions, type OAuthEndpoints,
} from './client.js'
export {
  OAuthConsent, OAuthCallbackError, CALLBACK_PATH, STATE_COOKIE, NONCE_COOKIE, STATE_TTL_MS,
  type CallbackRefusal, type ConsentOptions, type CreateOAuthInput,
} from './consent.js'
export { OAuthMinter, type OAuthCredentialRef, type OAuthMinterOptions } from './minter.js'
export { OAUTH_KIND, OAUTH_STATUSES, type OAuthStatus } from './vocabulary.js'
