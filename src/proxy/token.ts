// How the proxy reads a request's capability token; the tokens themselves (minting, verification,
// the signing key) are src/secrets/'s.
import type { IncomingMessage } from 'node:http'
import type { CapabilityTokens, TokenCheck } from '../secrets/index.js'
import { deny, type PolicyDenial } from './decision.js'
import type { MaybePromise } from './maybe.js'
import type { TunnelContext } from './request-state.js'

/**
 * The one way the proxy reads a request's capability token: inside a tunnel, the check made once
 * at CONNECT (without a promise once it has settled, front.ts); otherwise (plain HTTP, CONNECT
 * itself) the request's own `Proxy-Authorization` header (the first one when it is repeated).
 */
export function requestToken(tokens: CapabilityTokens, req: IncomingMessage): Promise<TokenCheck>
export function requestToken(tokens: CapabilityTokens, req: IncomingMessage, tunnel?: Pick<TunnelContext, 'token' | 'checked'>): MaybePromise<TokenCheck>
export function requestToken(tokens: CapabilityTokens, req: IncomingMessage, tunnel?: Pick<TunnelContext, 'token' | 'checked'>): MaybePromise<TokenCheck> {
  if (tunnel) return tunnel.checked ?? tunnel.token
  const h = req.headers['proxy-authorization']
  return tokens.check(Array.isArray(h) ? h[0] : h)
}

/**
 * Whether a request's own credentials call for a `407` challenge (a CONNECT: instead of a tunnel;
 * a plain-HTTP request: instead of a 403): none at all (no header, an empty one), or a scheme the
 * proxy does not read (only `Bearer` and `Basic` carry a capability token). Clients such as git
 * (libcurl's "any" proxy auth) send their first request bare and supply the token only when
 * challenged. A token that is present but fails verification is a readable `invalid_token` (inside
 * the tunnel for a CONNECT). Never asked for a request inside a tunnel: its CONNECT was.
 */
export function wantsProxyChallenge(req: IncomingMessage, check: TokenCheck): boolean {
  if (check.ok) return false
  if (check.reason === 'no_token') return true
  const h = req.headers['proxy-authorization']
  const scheme = /^\s*(\S+)/.exec((Array.isArray(h) ? h[0] : h) ?? '')?.[1]?.toLowerCase()
  return scheme !== 'bearer' && scheme !== 'basic'
}

/** What the `407` offers: `Basic` with the token as password (`http://x:TOKEN@proxy`). */
export const PROXY_CHALLENGE = 'Basic realm="corral"'

/** The challenge's denial: `407`, its row in the platform scope (nothing presented could name an org). */
export function proxyChallenge(check: TokenCheck): PolicyDenial {
  return deny(check.ok ? 'no_token' : check.reason, { challenge: 'basic' }, 407)
}
