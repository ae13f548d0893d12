// The OAuth client corral is, over openid-client (v6, a certified relying party): discovery of an
// issuer, the Configuration of a stored credential, the one fetch every call goes through (extra
// trusted roots for a provider behind a private CA, a timeout) and the classification of a refresh
// failure. Nothing here logs, and no error leaving this file carries provider text.
import { rootCertificates } from 'node:tls'
import * as client from 'openid-client'
import { Agent, fetch as undiciFetch } from 'undici'

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
  readonly #agent: Agent | undefined
  readonly timeoutSeconds: number

  constructor(opts: OAuthHttpOptions = {}) {
    this.#agent = opts.extraCaPem?.length ? new Agent({ connect: { ca: [...rootCertificates, ...opts.extraCaPem] } }) : undefined
    this.timeoutSeconds = opts.timeoutSeconds ?? 10
  }

  /** openid-client's customFetch: the same undici agent for every call to a provider. */
  readonly fetch = ((url: string, options: Record<string, unknown>) =>
    undiciFetch(url, { ...options, ...(this.#agent ? { dispatcher: this.#agent } : {}) } as never)) as unknown as client.CustomFetch

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
    await this.#agent?.close()
  }
}

/** A refresh failure as corral sees it: terminal (with the OAuth error code only) or transient. */
export function classifyRefreshError(err: unknown): TerminalOAuthError | TransientOAuthError {
  if (err instanceof client.ResponseBodyError && err.status >= 400 && err.status < 500 && TERMINAL_OAUTH_ERRORS.has(err.error)) {
    return new TerminalOAuthError(err.error)
  }
  return new TransientOAuthError()
}
