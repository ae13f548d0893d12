// A real OpenID Connect provider on HTTPS loopback: `oidc-provider` (a certified implementation)
// with one confidential client registered for corral's callback. Consent is completed the way a
// browser would: the helper follows the provider's redirects with a cookie jar, and its own
// interaction endpoint (the page a user would see) signs in `account` and grants the requested
// scopes — or refuses when told to. Refresh tokens rotate on every use, and a rotated (consumed)
// refresh token presented again revokes the whole grant (oidc-provider's reuse detection, as
// providers with refresh-token rotation do); `revoke()` destroys an
// account's grants at the provider; `accessTtl` sets the lifetime of the next access tokens.
// `tokenRequests` counts token endpoint calls (answered or refused), by grant type.
import { createServer, type Server } from 'node:https'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { parseSetCookie } from 'cookie'
import Provider, { type ClientInfo } from 'oidc-provider'
import { Agent, fetch as undiciFetch } from 'undici'

export interface OidcProvider {
  issuer: string
  clientId: string
  clientSecret: string
  /** Lifetime in seconds of access tokens issued from now on. */
  accessTtl: number
  /** Token endpoint calls, by grant_type. */
  tokenRequests: Record<string, number>
  /**
   * Follows an authorize URL as a browser would, consenting as `account` (or refusing with
   * `deny`), until the provider redirects to corral's callback: that URL.
   */
  consent(authUrl: string, opts?: { account?: string; deny?: boolean }): Promise<URL>
  /** Withdraws every grant of `account` at the provider (its refresh tokens stop working). */
  revoke(account: string): Promise<void>
  /** The token endpoint answers 503 while set (a provider outage). */
  outage: boolean
  /** Milliseconds the token endpoint holds each call before answering (a slow provider: concurrent calls overlap). */
  tokenDelayMs: number
  /** Whether `token` is an access token the provider issued and still honours. */
  accessTokenValid(token: string): Promise<boolean>
  close(): Promise<void>
}

export async function startOidcProvider(opts: { tls: { key: string; cert: string }; caPem: string; redirectUri: string; scopes?: string[] }): Promise<OidcProvider> {
  let handler: (req: IncomingMessage, res: ServerResponse) => void = (_q, r) => r.end()
  const server: Server = createServer({ ...opts.tls, keepAlive: true }, (req, res) => handler(req, res))
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const issuer = `https://127.0.0.1:${(server.address() as AddressInfo).port}`
  const clientId = 'corral-test'
  const clientSecret = `secret-${Math.random().toString(36).slice(2)}`
  const grants = new Map<string, string[]>()
  const pending = new Map<string, { account: string; deny: boolean }>()
  const me: OidcProvider = {
    issuer, clientId, clientSecret, accessTtl: 3600, tokenRequests: {}, outage: false, tokenDelayMs: 0,
    consent: async () => new URL('about:blank'),
    revoke: async () => {},
    accessTokenValid: async () => false,
    close: async () => {},
  }

  const provider = new Provider(issuer, {
    clients: [{
      client_id: clientId, client_secret: clientSecret, redirect_uris: [opts.redirectUri],
      grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'client_secret_basic',
    }],
    scopes: ['openid', 'offline_access', ...(opts.scopes ?? [])],
    findAccount: async (_ctx: unknown, id: string) => ({ accountId: id, claims: async () => ({ sub: id }) }),
    features: { devInteractions: { enabled: false }, revocation: { enabled: true } },
    interactions: { url: (_ctx: unknown, interaction: { uid: string }) => `/interaction/${interaction.uid}` },
    rotateRefreshToken: true,
    issueRefreshToken: async (_ctx: unknown, client: ClientInfo) => client.grantTypeAllowed('refresh_token'),
    ttl: { AccessToken: () => me.accessTtl, RefreshToken: 14 * 86400, AuthorizationCode: 60, Interaction: 600, Session: 3600, Grant: 14 * 86400 },
    cookies: { keys: ['corral-test-cookie-key'] },
  })
  const callback = provider.callback()
  const count = (ctx: { oidc?: { params?: Record<string, unknown> } }) => {
    const type = String(ctx.oidc?.params?.grant_type ?? 'unknown')
    me.tokenRequests[type] = (me.tokenRequests[type] ?? 0) + 1
  }
  provider.on('grant.success', count)
  provider.on('grant.error', count)

  const interaction = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const details = await provider.interactionDetails(req, res)
    const who = pending.get(details.params.state as string) ?? { account: 'alice', deny: false }
    if (who.deny) {
      await provider.interactionFinished(req, res, { error: 'access_denied', error_description: 'PROVIDER-SECRET-TEXT the user said no' }, { mergeWithLastSubmission: false })
      return
    }
    if (details.prompt.name === 'login') {
      await provider.interactionFinished(req, res, { login: { accountId: who.account } }, { mergeWithLastSubmission: false })
      return
    }
    const grant = details.grantId ? (await provider.Grant.find(details.grantId))! : new provider.Grant({ accountId: details.session!.accountId, clientId })
    grant.addOIDCScope(String(details.params.scope))
    const grantId = await grant.save()
    grants.set(who.account, [...(grants.get(who.account) ?? []), grantId])
    await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true })
  }

  handler = (req, res) => {
    const path = (req.url ?? '').split('?')[0]!
    if (path === '/token' && req.method === 'POST') {
      if (me.outage) {
        res.writeHead(503, { 'content-type': 'text/plain' }).end('PROVIDER-SECRET-TEXT upstream maintenance')
        return
      }
      if (me.tokenDelayMs > 0) {
        setTimeout(() => void callback(req, res), me.tokenDelayMs)
        return
      }
    }
    if (path.startsWith('/interaction/')) {
      interaction(req, res).catch((err: unknown) => res.writeHead(500).end(String(err)))
      return
    }
    void callback(req, res)
  }

  const agent = new Agent({ connect: { ca: opts.caPem } })
  me.consent = async (authUrl, o = {}) => {
    const state = new URL(authUrl).searchParams.get('state') ?? ''
    pending.set(state, { account: o.account ?? 'alice', deny: o.deny ?? false })
    const jar = new Map<string, string>()
    let url = new URL(authUrl)
    for (let hop = 0; hop < 12; hop++) {
      if (url.href.startsWith(opts.redirectUri)) return url
      const res = await undiciFetch(url, { redirect: 'manual', dispatcher: agent, headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') } })
      for (const raw of res.headers.getSetCookie()) {
        const c = parseSetCookie(raw)
        if (c.value) jar.set(c.name, c.value)
        else jar.delete(c.name)
      }
      await res.arrayBuffer()
      const location = res.headers.get('location')
      if (!location) throw new Error(`the provider stopped at ${url.pathname} with ${res.status}`)
      url = new URL(location, url)
    }
    throw new Error('the provider never redirected to the callback')
  }
  me.revoke = async (account) => {
    for (const id of grants.get(account) ?? []) await (await provider.Grant.find(id))?.destroy()
    grants.delete(account)
  }
  me.accessTokenValid = async (token) => {
    const t = await provider.AccessToken.find(token)
    return !!t && !t.isExpired && !!(await provider.Grant.find(t.grantId!))
  }
  me.close = async () => {
    server.closeAllConnections()
    await new Promise((r) => server.close(r))
    await agent.close()
  }
  return me
}
