// The OAuth client corral is, over openid-client (v6, a certified relying party): discovery of an
// issuer, the Configuration of a stored credential, the one fetch every call goes through (extra
// trusted roots for a provider behind a private CA, a timeout, the address guard) and the
// classification of a refresh failure. Nothing here logs, and no error leaving this file carries
// provider text.
//
// Issuer and token URLs are chosen by whoever holds `auth:write`, and serve fetches them: every
// connection goes through src/net/'s AddressGuard, the proxy's own check, where the socket is made
// (every resolved address, each redirect hop and each later call again: DNS rebinding gets nothing).
// Loopback, private, link-local and other special ranges, and serve's own listeners, are refused
// unless the operator names a range in CORRAL_OAUTH_ALLOW_PRIVATE (docs/credentials.md).
import { rootCertificates } from 'node:tls'
import * as client from 'openid-client'
import { Agent, fetch as undiciFetch } from 'undici'
import { AddressGuard, allowList, cidrList, destinationRefusal, guardedConnector } from '../../net/index.js'

/** The endpoints a credential keeps (discovered or given). `metadata`: the discovery document, when there was one. */
export interface OAuthEndpoints {
  issuer: string | null
  authorization_endpoint: string
  token_endpoint: string
  metadata?: Record<string, unknown>
}

export interface OAuthHttpOptions {
  /** PEM roots trusted besides the system's (serve's CORRAL_UPSTREAM_CA). */
  extraCaPem?: readonly string[]
  /** Seconds before a call to the provider is abandoned (a transient failure). Default 10. */
  timeoutSeconds?: number
  /** Checks every address a call connects to; default: special ranges refused, no own listeners known. */
  guard?: AddressGuard
  /** CIDRs of special ranges providers may be reached at: the operator's opt-in (CORRAL_OAUTH_ALLOW_PRIVATE). */
  allowPrivate?: readonly string[]
}

/** The variable an operator names private provider ranges in (`127.0.0.0/8,10.1.0.0/16`). */
export const OAUTH_ALLOW_PRIVATE_ENV = 'CORRAL_OAUTH_ALLOW_PRIVATE'

/** The operator's opt-in ranges from the environment; a bad entry throws, naming the variable. */
export function oauthAllowPrivate(env: Record<string, string | undefined>): string[] {
  return cidrList(env[OAUTH_ALLOW_PRIVATE_ENV], OAUTH_ALLOW_PRIVATE_ENV)
}

/** A provider URL serve will not connect to (private, loopback, link-local, special, or serve itself). */
export class ProviderAddressRefused extends Error {
  constructor(readonly own: boolean) {
    super(own
      ? 'names a listener of corral serve itself'
      : `resolves to a loopback, private, link-local or other special-purpose address; an operator can allow such a range with ${OAUTH_ALLOW_PRIVATE_ENV}`)
  }
}

/** The OAuth error codes after which a refresh token will never work again (RFC 6749 §5.2). */
export const TERMINAL_OAUTH_ERRORS = new Set(['invalid_grant', 'invalid_client', 'unauthorized_client', 'unsupported_grant_type', 'invalid_scope'])

/** A provider answer the caller must not retry: the refresh token (or the client) is dead. */
export class TerminalOAuthError extends Error {
  constructor(readonly code: string) {
    super(`the provider refused the refresh token (${code})`)
  }
}

/** Anything else: timeouts, connection failures, 5xx, malformed answers. Retried on a later request. */
export class TransientOAuthError extends Error {
  constructor() {
    super('the provider could not be reached or failed')
  }
}

export class OAuthHttp {
  readonly #agent: Agent
  readonly #guard: AddressGuard
  readonly #allow: ReturnType<typeof allowList> | undefined
  readonly timeoutSeconds: number

  constructor(opts: OAuthHttpOptions = {}) {
    this.#guard = opts.guard ?? new AddressGuard()
    this.#allow = opts.allowPrivate?.length ? allowList(opts.allowPrivate) : undefined
    // As the proxy's upstreams (src/proxy/upstream.ts): every connection checked where it is made.
    this.#agent = new Agent({ connect: guardedConnector(this.#guard, this.#allow, opts.extraCaPem?.length ? { ca: [...rootCertificates, ...opts.extraCaPem] } : {}) })
    this.timeoutSeconds = opts.timeoutSeconds ?? 10
  }

  /** openid-client's customFetch: the same guarded undici agent for every call to a provider. */
  readonly fetch = ((url: string, options: Record<string, unknown>) =>
    undiciFetch(url, { ...options, dispatcher: this.#agent } as never)) as unknown as client.CustomFetch

  /**
   * Refuses (ProviderAddressRefused) a URL whose host serve would not connect to, before anything
   * is stored; connections are checked again each time they are made.
   */
  async checkUrl(url: string): Promise<void> {
    const u = new URL(url)
    const port = Number(u.port) || (u.protocol === 'https:' ? 443 : 80)
    try {
      await this.#guard.resolve(u.hostname.replace(/^\[|\]$/g, ''), port, this.#allow)
    } catch (err) {
      const refused = destinationRefusal(err)
      // A name that does not resolve is not refused here: the call to it fails like any outage.
      if (refused) throw new ProviderAddressRefused(refused.own)
    }
  }

  /** The refusal in an error a call to a provider failed with, when the guard refused its address. */
  static refusal(err: unknown): ProviderAddressRefused | undefined {
    const refused = destinationRefusal(err)
    return refused ? new ProviderAddressRefused(refused.own) : undefined
  }

  /** OpenID Connect discovery of `issuer`: its endpoints (the validation of the document is openid-client's). */
  async discover(issuer: string, clientId: string, clientSecret: string): Promise<OAuthEndpoints> {
    const config = await client.discovery(new URL(issuer), clientId, undefined, client.ClientSecretBasic(clientSecret), {
      [client.customFetch]: this.fetch, timeout: this.timeoutSeconds,
    })
    const m = config.serverMetadata()
    if (!m.authorization_endpoint || !m.token_endpoint) throw new Error('the discovery document names no authorization or token endpoint')
    return { issuer: m.issuer, authorization_endpoint: m.authorization_endpoint, token_endpoint: m.token_endpoint, metadata: { ...m } }
  }

  /** The openid-client Configuration of a stored credential (no secret: only for building an authorize URL). */
  configuration(endpoints: OAuthEndpoints, clientId: string, clientSecret?: string): client.Configuration {
    const server: client.ServerMetadata = {
      ...(endpoints.metadata ?? {}),
      issuer: endpoints.issuer ?? new URL(endpoints.authorization_endpoint).origin,
      authorization_endpoint: endpoints.authorization_endpoint,
      token_endpoint: endpoints.token_endpoint,
    }
    const config = new client.Configuration(server, clientId, undefined, clientSecret ? client.ClientSecretBasic(clientSecret) : client.None())
    config[client.customFetch] = this.fetch
    config.timeout = this.timeoutSeconds
    return config
  }

  async close(): Promise<void> {
    await this.#agent.close()
  }
}

/** A refresh failure as corral sees it: terminal (with the OAuth error code only) or transient. */
export function classifyRefreshError(err: unknown): TerminalOAuthError | TransientOAuthError {
  if (err instanceof client.ResponseBodyError && err.status >= 400 && err.status < 500 && TERMINAL_OAUTH_ERRORS.has(err.error)) {
    return new TerminalOAuthError(err.error)
  }
  return new TransientOAuthError()
}
