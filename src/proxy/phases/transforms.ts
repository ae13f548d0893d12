// Request transforms: header, path, query and body mutations evaluated by the compiled policy,
// then credential injection for its auth transforms. A failing transform is recorded in
// `transforms_failed` (and `auth_failures` for auth) while the request still goes through: the
// spec treats mutations as observation, not policy.
import type { PhaseOutcome } from '../decision.js'
import type { PhaseResult } from '../phase.js'
import { hostAgreesWithSni, injectCredentials } from '../credential-injection.js'
import type { ProxyCore, RequestState } from '../request-state.js'

const NO_SECRETS = (): undefined => undefined

/** Synchronous unless a credential is minted (auth transforms). */
export function transforms(core: ProxyCore, st: RequestState): PhaseResult {
  const ws = st.workspace!
  if (ws.policy.kind !== 'ok') return undefined
  const { ctx } = st
  const admission = st.admission!
  if (admission.decision !== 'allow') return undefined
  const out = ws.policy.policy.applyTransforms({
    match: admission.match,
    request: st.policyRequest!,
    context: st.policyContext!,
    json: st.json,
    hasBody: st.body ? st.body.length > 0 : hasBodyOnWire(st),
    secrets: core.secrets ? core.secrets.lookupFor(ws.record.org_id) : NO_SECRETS,
    // Secret-bearing transforms follow the credential rule: only when Host is the CONNECT target.
    secretsAllowed: hostAgreesWithSni(st),
  })
  if (out.injected.length) st.injected = [...out.injected]
  st.transformed = out
  ctx.transformsApplied += out.applied
  Object.assign(ctx.transformsFailed, out.failed)

  const headers: Record<string, string | string[]> = {}
  for (const name in out.headers) {
    const values = out.headers[name]!
    if (values.length === 0) continue
    headers[name] = values.length === 1 ? values[0]! : values
  }
  st.headers = headers
  if (out.bodyChanged && out.json !== undefined) st.outgoingBody = Buffer.from(JSON.stringify(out.json))

  const injecting = out.auth.length ? injectCredentials(core, st) : undefined
  if (injecting instanceof Promise) return injecting.then(() => askIdentity(st))
  return askIdentity(st)
}

/** Injected bytes are scrubbed from the response; a compressed body could hide them, so ask for none (response-headers.ts still decodes one that arrives compressed anyway). */
function askIdentity(st: RequestState): PhaseOutcome {
  if (st.injected?.length) st.headers['accept-encoding'] = 'identity'
  return undefined
}

function hasBodyOnWire(st: RequestState): boolean {
  const h = st.req.headers
  return (h['content-length'] !== undefined && h['content-length'] !== '0') || h['transfer-encoding'] !== undefined
}
