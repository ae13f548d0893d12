// The secrets part's face: sealing at rest (sealer.ts), the admin service the /v1 secrets and
// credentials routes call (admin.ts), the proxy's readers — org secrets (org-secrets.ts) and
// credential minting (credential-broker.ts) — the capability tokens workspaces carry to the proxy
// (capability-tokens.ts: minted by the control plane, verified by the proxy) and the shared
// vocabulary (material.ts).
// Arrows: secrets → store, audit (types), net (the address guard OAuth calls go through). Never server or proxy.
export { Sealer, loadMasterKey, secretBinding, credentialBinding } from './sealer.js'
export { OrgMaterialAdmin, MaterialInputError, NAME_PATTERN, reapPersonalCredentials, type Actor, type CredentialInput, type StaticProviderCheck } from './admin.js'
export { OrgSecrets } from './org-secrets.js'
export { StaticCredentialBroker } from './credential-broker.js'
export {
  OAuthConsent, OAuthCallbackError, OAuthHttp, OAuthMinter, CALLBACK_PATH, STATE_COOKIE, NONCE_COOKIE, OAUTH_KIND, OAUTH_STATUSES,
  OAUTH_ALLOW_PRIVATE_ENV, ProviderAddressRefused, oauthAllowPrivate,
  type CallbackRefusal, type CreateOAuthInput, type OAuthStatus,
} from './oauth/index.js'
export { CapabilityTokens, loadTokenKey, TOKEN_KEY_SETTING, type TokenCheck, type TokenKeySettings } from './capability-tokens.js'
export {
  CREDENTIAL_KINDS, CREDENTIALS_CHANNEL, SECRETS_CHANNEL,
  type CredentialBroker, type CredentialKind, type CredentialMaterial, type MintedCredential, type SecretLookup, type SecretsSource,
} from './material.js'
