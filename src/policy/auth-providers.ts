// The closed list of auth-provider slugs for AuthTransform.provider. The spec fixes the families
// (two OAuth families, twenty-two static-token APIs, four basic-auth providers, one query-key
// provider) but omits the vendor slugs; this table is our list. Placement is fixed per provider:
// the proxy reads it from here and injects the minted token; no CEL is involved. Placements follow
// each API's documentation (linked).

export type AuthFamily = 'static_token' | 'basic' | 'query_key' | 'oauth'

export type AuthPlacement =
  | { kind: 'header'; name: string; /** Prefix before the token, e.g. "Bearer" → "Bearer <token>". */ scheme?: string }
  | { kind: 'query'; param: string }
  /** Authorization: Basic base64(user:secret); the credential holds "user:secret". */
  | { kind: 'basic' }

export interface AuthProvider {
  family: AuthFamily
  placement: AuthPlacement
  docs: string
}

const bearer = (docs: string): AuthProvider => ({ family: 'static_token', placement: { kind: 'header', name: 'authorization', scheme: 'Bearer' }, docs })
const header = (name: string, docs: string, scheme?: string): AuthProvider => ({
  family: 'static_token',
  placement: scheme ? { kind: 'header', name, scheme } : { kind: 'header', name },
  docs,
})
const basic = (docs: string): AuthProvider => ({ family: 'basic', placement: { kind: 'basic' }, docs })

export const AUTH_PROVIDERS = Object.freeze({
  // OAuth families: the broker mints an access token; it is sent as a Bearer token.
  google: { family: 'oauth', placement: { kind: 'header', name: 'authorization', scheme: 'Bearer' }, docs: 'https://developers.google.com/identity/protocols/oauth2' },
  microsoft: { family: 'oauth', placement: { kind: 'header', name: 'authorization', scheme: 'Bearer' }, docs: 'https://learn.microsoft.com/entra/identity-platform/v2-oauth2-auth-code-flow' },

  // Static-token APIs (22).
  github: bearer('https://docs.github.com/rest/authentication/authenticating-to-the-rest-api'),
  gitlab: header('private-token', 'https://docs.gitlab.com/ee/api/rest/authentication.html'),
  anthropic: header('x-api-key', 'https://docs.anthropic.com/en/api/overview'),
  openai: bearer('https://platform.openai.com/docs/api-reference/authentication'),
  huggingface: bearer('https://huggingface.co/docs/hub/security-tokens'),
  npm: bearer('https://docs.npmjs.com/about-access-tokens'),
  pypi: bearer('https://docs.pypi.org/trusted-publishers/'),
  slack: bearer('https://api.slack.com/authentication/token-types'),
  linear: header('authorization', 'https://developers.linear.app/docs/graphql/working-with-the-graphql-api'),
  notion: bearer('https://developers.notion.com/reference/authentication'),
  stripe: bearer('https://docs.stripe.com/api/authentication'),
  sentry: bearer('https://docs.sentry.io/api/auth/'),
  datadog: header('dd-api-key', 'https://docs.datadoghq.com/api/latest/authentication/'),
  pagerduty: header('authorization', 'https://developer.pagerduty.com/docs/authentication', 'Token token='),
  cloudflare: bearer('https://developers.cloudflare.com/fundamentals/api/get-started/create-token/'),
  digitalocean: bearer('https://docs.digitalocean.com/reference/api/'),
  vercel: bearer('https://vercel.com/docs/rest-api#authentication'),
  netlify: bearer('https://docs.netlify.com/api/get-started/#authentication'),
  circleci: header('circle-ci-token', 'https://circleci.com/docs/api/v2/#section/Authentication'),
  atlassian: bearer('https://developer.atlassian.com/cloud/confluence/basic-auth-for-rest-apis/'),
  mistral: bearer('https://docs.mistral.ai/api/'),
  groq: bearer('https://console.groq.com/docs/api-reference'),

  // Basic-auth providers (4): the credential value is "user:secret".
  bitbucket: basic('https://developer.atlassian.com/cloud/bitbucket/rest/intro/#authentication'),
  jira: basic('https://developer.atlassian.com/cloud/jira/platform/basic-auth-for-rest-apis/'),
  twilio: basic('https://www.twilio.com/docs/usage/requests-to-twilio'),
  artifactory: basic('https://jfrog.com/help/r/jfrog-rest-apis/artifactory-rest-apis'),

  // Query-key provider (1).
  'google-maps': { family: 'query_key', placement: { kind: 'query', param: 'key' }, docs: 'https://developers.google.com/maps/documentation/javascript/get-api-key' },
} satisfies Record<string, AuthProvider>)

export type AuthProviderSlug = keyof typeof AUTH_PROVIDERS

export function isAuthProvider(slug: string): slug is AuthProviderSlug {
  return Object.hasOwn(AUTH_PROVIDERS, slug)
}

/** A provider whose credentials are stored values (static token, basic, query key), not OAuth. */
export function isStaticAuthProvider(slug: string): slug is AuthProviderSlug {
  return isAuthProvider(slug) && AUTH_PROVIDERS[slug].family !== 'oauth'
}
