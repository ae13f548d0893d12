// Phase request_headers: capability token (a plain-HTTP request without one readable is challenged,
// 407), workspace activation, policy presence, static rule
// match and admission CEL (through CompiledPolicy.admit; this module never evaluates CEL itself).
import { canonicalPath } from '../../policy/index.js'
import type { AdmissionResult, CompiledPolicy, PolicyContext, PolicyRequest } from '../../policy/index.js'
import type { CapabilityClaims } from '../../contract/index.js'
import type { TokenCheck } from '../../secrets/index.js'
import { attributeToken, deny, withFields, type PhaseOutcome } from '../decision.js'
import { andThen } from '../maybe.js'
import type { PhaseResult } from '../phase.js'
import type { ProxyCore, RequestState } from '../request-state.js'
import { outboundScopeDenial } from '../token-scope.js'
import { proxyChallenge, requestToken, wantsProxyChallenge } from '../token.js'
import type { ActivationResult, ActiveWorkspace } from '../workspaces.js'

const ADMISSION_DECISIONS = new Set(['allow', 'pending', 'deny'])
/** Past a token's `exp`, how long it is still honoured (clock skew between signer and proxy). */
export const TOKEN_CLOCK_TOLERANCE_MS = 5_000

/** Verifies the token, activates the workspace and admits the request; a promise only when one of them must wait. */
export function requestHeaders(core: ProxyCore, st: RequestState): PhaseResult {
  return andThen(requestToken(core.tokens, st.req, st.entry.tunnel), (check) => verified(core, st, check))
}

function verified(core: ProxyCore, st: RequestState, check: TokenCheck): PhaseResult {
  const { ctx, entry } = st
  const refused = attributeToken(ctx, check)
  // Plain HTTP with no credential the proxy can read: challenged, like a bare CONNECT (token.ts).
  if (!entry.tunnel && wantsProxyChallenge(st.req, check)) return proxyChallenge(check)
  if (refused || !check.ok) return refused
  const { claims } = check
  // A keep-alive tunnel outlives its CONNECT: the token's expiry still applies to every request.
  if (entry.tunnel && claims.exp * 1000 + TOKEN_CLOCK_TOLERANCE_MS < Date.now()) {
    return attributeToken(ctx, { ok: false, reason: 'invalid_token', expired: { org_id: claims.org_id, workspace_id: claims.workspace_id } })
  }
  // A start-up token or an ended task's token reaches nothing outbound (token-scope.ts).
  return andThen(outboundScopeDenial(core, claims), (outOfScope) => outOfScope
    ?? andThen(core.workspaces.get(claims.org_id, claims.workspace_id), (activation) => activated(core, st, claims, activation)))
}

function activated(core: ProxyCore, st: RequestState, claims: CapabilityClaims, activation: ActivationResult): PhaseResult {
  if (!activation.ok) return deny(activation.reason)
  const ws = activation.workspace
  st.workspace = ws
  ws.inFlight++
  const r = ws.record
  st.ctx.attribution = withFields(st.ctx.attribution, st.ctx.attribution.org_id, r.creator_user_id, undefined, undefined, r.role, r.provider)
  // Warm the org's secrets once (cached; transforms read them synchronously).
  const warming = core.secrets?.load(r.org_id)
  return warming ? warming.then(() => admitWith(st, ws, claims)) : admitWith(st, ws, claims)
}

function admitWith(st: RequestState, ws: ActiveWorkspace, claims: CapabilityClaims): PhaseOutcome {
  const { ctx, entry } = st
  const r = ws.record
  if (ws.policy.kind === 'none') return deny('no_policy')
  if (ws.policy.kind === 'error') return deny('policy_error', { message: ws.policy.message })
  const policy = ws.policy.policy
  // A document with no capabilities can never produce a decision: "policy returned no result".
  if (policy.capabilities.length === 0) return deny('policy_empty')

  // One canonical path: what the globs and CEL see is what is forwarded (upstream.ts sends ctx.path).
  const canonical = canonicalPath(ctx.path)
  if (!canonical.ok) return deny('path_ambiguous', { message: canonical.message })
  ctx.path = canonical.path

  const request: PolicyRequest = {
    method: ctx.method,
    scheme: entry.scheme,
    // The port is part of the destination: a pattern without one matches only the scheme's
    // default port, so any other port is carried in the host the policy sees (`name:8443`).
    host: hostWithPort(entry),
    path: ctx.path,
    rawQuery: rawQueryOf(st.req.url ?? ''),
    headers: st.headers,
  }
  st.policyRequest = request
  const policyContext: PolicyContext = { workspace: { id: r.id, org_id: r.org_id, role: r.role, environment: r.environment } }
  if (claims.task_id) policyContext.task = { id: claims.task_id }
  st.policyContext = policyContext
  return admit(policy, st)
}

/** The proxy's own limits for an attributed request (docs/reliability.md, "Limits"). */
export function workspaceLimits(core: ProxyCore, st: RequestState): PhaseOutcome {
  const L = core.limits
  if (st.workspace && st.workspace.inFlight > L.maxInFlightPerWorkspace) {
    return deny('limit_exceeded', { limit: 'inflight_per_workspace', max: L.maxInFlightPerWorkspace }, 429)
  }
  const declared = Number(st.req.headers['content-length'])
  if (Number.isFinite(declared) && declared > L.maxBodyBytes) return deny('limit_exceeded', { limit: 'body_bytes', max: L.maxBodyBytes }, 413)
  return undefined
}

function admit(policy: CompiledPolicy, st: RequestState): PhaseOutcome {
  const { ctx } = st
  let result: AdmissionResult
  try {
    result = policy.admit(st.policyRequest!, st.policyContext!)
  } catch (err) {
    return deny('policy_error', { message: err instanceof Error ? err.message.slice(0, 200) : 'evaluation failed' })
  }
  if (result === undefined || result === null) return deny('policy_empty')
  if (typeof result !== 'object' || !ADMISSION_DECISIONS.has((result as { decision?: unknown }).decision as string)) {
    return deny('policy_type_error')
  }
  if (result.decision === 'deny') {
    const evals = result.detail.allowrule_eval
    if (evals) ctx.allowruleEval = evals
    if (result.detail.capability) ctx.capability = result.detail.capability
    // An https-only rule that matched everything but the scheme: the request skipped the TLS front.
    if (result.reason === 'no_match' && st.entry.scheme === 'http' && evals?.some((e) => e.failed === 'scheme')) {
      return deny('no_scheme', detailOf(result.detail))
    }
    return deny(result.reason, detailOf(result.detail))
  }
  if (result.decision === 'allow') {
    if (!result.match || typeof result.match.capability !== 'string') return deny('policy_type_error')
    ctx.match = result.match
    ctx.capability = result.match.capability
  } else if (!Array.isArray(result.candidates) || result.candidates.length === 0) {
    return deny('policy_type_error')
  }
  st.admission = result
  return undefined
}

function detailOf(d: object): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(d)) if (v !== undefined) out[k] = v
  return out
}

function hostWithPort(entry: RequestState['entry']): string {
  const def = entry.scheme === 'https' ? 443 : 80
  const host = entry.host.includes(':') ? `[${entry.host}]` : entry.host
  return entry.port === def || entry.port === 0 ? host : `${host}:${entry.port}`
}

function rawQueryOf(url: string): string {
  const q = url.indexOf('?')
  return q < 0 ? '' : url.slice(q + 1)
}
