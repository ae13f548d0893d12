// The last look before bytes leave (the end of admission): a workspace stopped while the request
// was admitted sends nothing, and nothing is forwarded while the audit log could not make the
// request's row durable (audit-gate.ts): `audit_unavailable`, 503 with Retry-After.
import { deny, type PhaseOutcome } from '../decision.js'
import type { ProxyCore, RequestState } from '../request-state.js'

export function forwardGate(core: ProxyCore, st: RequestState): PhaseOutcome {
  if (!st.workspace!.active) return deny('workspace_gone')
  const retryAfterS = core.auditGate.closedFor()
  if (retryAfterS !== undefined) return deny('audit_unavailable', { retry_after_s: retryAfterS }, 503)
  return undefined
}
