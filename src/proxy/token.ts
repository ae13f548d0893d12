// How the proxy reads a request's capability token; the tokens themselves (minting, verification,
// the signing key) are src/secrets/'s.
import type { IncomingMessage } from 'node:http'
import type { CapabilityTokens, TokenCheck } from '../secrets/index.js'
import type { TunnelContext } from './request-state.js'

/**
 * The one way the proxy reads a request's capability token: inside a tunnel, the check made once
 * at CONNECT; otherwise (plain HTTP, CONNECT itself) the request's own `Proxy-Authorization`
 * header (the first one when it is repeated).
 */
export function requestToken(tokens: CapabilityTokens, req: IncomingMessage, tunnel?: { readonly token: Promise<TokenCheck> }): Promise<TokenCheck> {
  if (tunnel) return tunnel.token
  const h = req.headers['proxy-authorization']
  return tokens.check(Array.isArray(h) ? h[0] : h)
}

/** `requestToken` without a promise inside a tunnel whose check at CONNECT has settled (front.ts). */
export function requestTokenNow(tokens: CapabilityTokens, req: IncomingMessage, tunnel?: TunnelContext): TokenCheck | Promise<TokenCheck> {
  return tunnel?.checked ?? requestToken(tokens, req, tunnel)
}
