// Credential injection for auth transforms. The policy says which credential and which provider;
// the provider registry (data, src/policy/auth-providers.ts) says where the token goes; the broker
// mints the token. The agent never sees it and no row, log or error ever carries it.
//
// Refusals (all recorded as `auth_unavailable` in both transforms_failed and auth_failures, the
// spec's one coarse reason):
//  - plain HTTP: a credential would cross the network in clear;
//  - TRACE/TRACK: the upstream would echo the credential back to the agent;
//  - Host header ≠ TLS SNI (or ≠ CONNECT host): the credential could be delivered to a host the
//    policy did not evaluate;
//  - the broker cannot mint it (unknown credential, not active, decryption failure, an OAuth
//    provider's terminal or transient refusal).
import type { MintedCredential } from '../secrets/index.js'
import type { PlacementLookup, ProxyCore, RequestState } from './request-state.js'
import { AUTH_PROVIDERS, isAuthProvider, type AuthPlacement } from '../policy/index.js'

/** Placement from the policy's provider registry (data, not code); OAuth families carry a minted access token. */
export const providerPlacement: PlacementLookup = (provider) =>
  isAuthProvider(provider) ? AUTH_PROVIDERS[provider].placement : undefined

const ECHOING_METHODS = new Set(['TRACE', 'TRACK'])

export async function injectCredentials(core: ProxyCore, st: RequestState): Promise<void> {
  const out = st.transformed!
  const { ctx, entry } = st
  const refuse = entry.scheme !== 'https' || ECHOING_METHODS.has(ctx.method) || !hostAgreesWithSni(st)
  for (const auth of out.auth) {
    const fail = (): void => {
      ctx.transformsFailed[auth.key] = 'auth_unavailable'
      ctx.authFailures[auth.credential] = 'auth_unavailable'
    }
    if (refuse || !core.credentials || !core.placements) {
      fail()
      continue
    }
    const placement = core.placements(auth.provider)
    let minted: MintedCredential | undefined
    try {
      minted = placement ? await core.credentials.mint(ctx.attribution.org_id, auth.credential, auth.provider, st.workspace?.record.creator_user_id) : undefined
    } catch {
      minted = undefined // provider error text is never echoed (spec: coarse on purpose)
    }
    if (!placement || !minted || !place(st, placement, minted)) {
      fail()
      continue
    }
    ctx.transformsApplied++
    if (!ctx.authUsed.includes(auth.credential)) ctx.authUsed.push(auth.credential)
  }
}

/** Records bytes the proxy put into the request, for scrubbing from the response (scrub.ts). */
function injected(st: RequestState, ...values: string[]): void {
  ;(st.injected ??= []).push(...values)
}

function place(st: RequestState, placement: AuthPlacement, cred: MintedCredential): boolean {
  switch (placement.kind) {
    case 'header': {
      if (cred.kind === 'basic_auth') return false
      // "Bearer" + token → "Bearer <token>"; a scheme ending in "=" (PagerDuty's "Token token=") takes the token directly.
      const scheme = placement.scheme
      const value = !scheme ? cred.secret : scheme.endsWith('=') ? `${scheme}${cred.secret}` : `${scheme} ${cred.secret}`
      st.headers[placement.name.toLowerCase()] = value
      injected(st, value, cred.secret)
      return true
    }
    case 'basic': {
      const user = cred.kind === 'basic_auth' ? (cred.username ?? '') : cred.secret
      const pass = cred.kind === 'basic_auth' ? cred.secret : ''
      const blob = Buffer.from(`${user}:${pass}`).toString('base64')
      st.headers['authorization'] = 'Basic ' + blob
      // The password in clear and the encoded pair; the user name alone is not a secret.
      injected(st, blob, ...(pass ? [pass] : [cred.secret]))
      return true
    }
    case 'query': {
      if (cred.kind === 'basic_auth') return false
      const out = st.transformed!
      const params = new URLSearchParams(out.rawQuery)
      params.set(placement.param, cred.secret)
      out.rawQuery = params.toString()
      // An echo of the URL returns the encoded form.
      injected(st, cred.secret, new URLSearchParams({ k: cred.secret }).toString().slice(2), encodeURIComponent(cred.secret))
      return true
    }
  }
}

/**
 * Whether the request goes where the policy looked: inside a tunnel, with a Host header naming the
 * CONNECT target (and the SNI, when one was sent). Credentials and secrets are injected only then.
 */
export function hostAgreesWithSni(st: RequestState): boolean {
  const tunnel = st.entry.tunnel
  if (!tunnel) return false
  const raw = st.req.headers.host
  if (!raw) return false
  const host = stripPort(raw.toLowerCase()).replace(/\.$/, '')
  if (host !== tunnel.host) return false
  return tunnel.sni === undefined ? true : tunnel.sni === host
}

function stripPort(h: string): string {
  if (h.startsWith('[')) return h.slice(1, h.indexOf(']'))
  const i = h.lastIndexOf(':')
  return i > 0 && h.indexOf(':') === i ? h.slice(0, i) : h
}
