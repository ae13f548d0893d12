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
import type { MaybePromise } from './maybe.js'
import type { PlacementLookup, ProxyCore, RequestState } from './request-state.js'
import { AUTH_PROVIDERS, isAuthProvider, type AuthPlacement, type TransformOutput } from '../policy/index.js'

type AuthTransform = TransformOutput['auth'][number]

/** Placement from the policy's provider registry (data, not code); OAuth families carry a minted access token. */
export const providerPlacement: PlacementLookup = (provider) =>
  isAuthProvider(provider) ? AUTH_PROVIDERS[provider].placement : undefined

const ECHOING_METHODS = new Set(['TRACE', 'TRACK'])

/** Synchronous unless a credential must be read or minted first (the broker's cache answers at once). */
export function injectCredentials(core: ProxyCore, st: RequestState): MaybePromise<void> {
  const { ctx, entry } = st
  const refuse = entry.scheme !== 'https' || ECHOING_METHODS.has(ctx.method) || !hostAgreesWithSni(st)
  return injectFrom(core, st, st.transformed!.auth, 0, refuse)
}

function injectFrom(core: ProxyCore, st: RequestState, auths: readonly AuthTransform[], from: number, refuse: boolean): MaybePromise<void> {
  for (let i = from; i < auths.length; i++) {
    const auth = auths[i]!
    const placement = refuse || !core.credentials || !core.placements ? undefined : core.placements(auth.provider)
    if (!placement) {
      authFailed(st, auth)
      continue
    }
    let minted: MaybePromise<MintedCredential | undefined>
    try {
      minted = core.credentials!.mint(st.ctx.attribution.org_id, auth.credential, auth.provider, st.workspace?.record.creator_user_id)
    } catch {
      minted = undefined // provider error text is never echoed (spec: coarse on purpose)
    }
    if (minted instanceof Promise) {
      return minted.catch(() => undefined).then((m) => {
        placed(st, auth, placement, m)
        return injectFrom(core, st, auths, i + 1, refuse)
      })
    }
    placed(st, auth, placement, minted)
  }
  return undefined
}

function placed(st: RequestState, auth: AuthTransform, placement: AuthPlacement, minted: MintedCredential | undefined): void {
  if (!minted || !place(st, placement, minted)) return authFailed(st, auth)
  const { ctx } = st
  ctx.transformsApplied++
  if (!ctx.authUsed.includes(auth.credential)) ctx.authUsed.push(auth.credential)
}

function authFailed(st: RequestState, auth: AuthTransform): void {
  st.ctx.transformsFailed[auth.key] = 'auth_unavailable'
  st.ctx.authFailures[auth.credential] = 'auth_unavailable'
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
      ;(st.injected ??= []).push(value, cred.secret)
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
  // The requests of one tunnel name the same Host: the last one that agreed is remembered.
  if (raw === tunnel.agreedHost) return true
  const host = stripPort(raw.toLowerCase()).replace(/\.$/, '')
  if (host !== tunnel.host) return false
  const agrees = tunnel.sni === undefined ? true : tunnel.sni === host
  if (agrees) tunnel.agreedHost = raw
  return agrees
}

function stripPort(h: string): string {
  if (h.startsWith('[')) return h.slice(1, h.indexOf(']'))
  const i = h.lastIndexOf(':')
  return i > 0 && h.indexOf(':') === i ? h.slice(0, i) : h
}
