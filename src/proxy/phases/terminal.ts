// The terminal phase: turns the DecisionContext into exactly one `policy_decision` row. It runs
// for every request that reached the proxy, allowed or denied, and refuses to emit twice (a second
// call is a lifecycle bug, like undici's handler asserts; it is reported, never written).
import type { NewAuditEvent } from '../../contract/index.js'
import type { DecisionContext } from '../decision.js'
import { rowKept } from '../audit-gate.js'
import type { ProxyCore } from '../request-state.js'

const ALLOWRULE_EVAL_REASONS = new Set(['no_match', 'schema_violation', 'format_mismatch', 'no_scheme'])

export function decisionRow(ctx: DecisionContext): NewAuditEvent {
  const a = ctx.attribution
  const denial = ctx.denial
  const row: NewAuditEvent = {
    org_id: a.org_id,
    user_id: a.user_id,
    event_type: 'policy_decision',
    ...(a.workspace_id ? { workspace_id: a.workspace_id } : {}),
    ...(a.task_id ? { task_id: a.task_id } : {}),
    agent_role: a.agent_role ?? '',
    agent_provider: a.agent_provider ?? '',
    destination: ctx.destination,
    method: ctx.method,
    path: ctx.path,
    decision: denial ? 'deny' : 'allow',
    latency_ms: ctx.latencyMs(),
    transforms_applied: ctx.transformsApplied,
    validations_applied: ctx.validationsApplied,
    policy_type: 'http',
    phase: ctx.phase,
    capability_name: ctx.capability ?? '',
    transforms_failed: { ...ctx.transformsFailed },
    auth_used: [...ctx.authUsed],
    auth_failures: { ...ctx.authFailures },
  }
  if (denial) {
    row.reason = denial.reason
    const detail: Record<string, unknown> = { ...ctx.callDetail, ...denial.detail }
    if (ALLOWRULE_EVAL_REASONS.has(denial.reason) && ctx.allowruleEval && !detail.allowrule_eval) detail.allowrule_eval = ctx.allowruleEval
    // Refused after the upstream answered (a request body over the limit while it streamed).
    if (ctx.upstreamStatus !== undefined) Object.assign(detail, upstreamOutcome(ctx))
    if (ctx.protocol !== undefined) Object.assign(detail, streamOutcome(ctx))
    if (Object.keys(detail).length) row.detail = detail
  } else {
    row.debits = { ...ctx.debits }
    row.budget_state = { ...ctx.budgetState }
    row.floored = { ...ctx.floored }
    // An allow was forwarded: the row says what the upstream answered and whether it all arrived,
    // so a 404 or a 500, or a stream cut short, does not read as a plain allow.
    // The allow rule that admitted it (its name, or `allow[i]`), as `caps test` and allowrule_eval name it.
    row.detail = { ...(ctx.match ? { rule: ctx.match.ruleKey } : {}), ...ctx.callDetail, ...ctx.detail, ...upstreamOutcome(ctx) }
    if (ctx.protocol !== undefined) Object.assign(row.detail, streamOutcome(ctx))
  }
  return row
}

/** `detail.protocol` of an HTTP/2 stream, with `detail.grpc_status`/`grpc_message` when the client got one. */
function streamOutcome(ctx: DecisionContext): { protocol: string; grpc_status?: number; grpc_message?: string } {
  const out: { protocol: string; grpc_status?: number; grpc_message?: string } = { protocol: ctx.protocol! }
  if (ctx.grpcStatus !== undefined) out.grpc_status = ctx.grpcStatus
  if (ctx.grpcMessage !== undefined) out.grpc_message = ctx.grpcMessage
  return out
}

/** `detail.upstream_status` (when the upstream answered at all) and `detail.response_complete`. */
function upstreamOutcome(ctx: DecisionContext): { upstream_status?: number; response_complete: boolean } {
  return ctx.upstreamStatus === undefined ? { response_complete: ctx.responseComplete } : { upstream_status: ctx.upstreamStatus, response_complete: ctx.responseComplete }
}

/** Whether the request's row is recorded (durable, with the audit log's writer) or was refused. */
export type TerminalOutcome = { recorded: true } | { recorded: false; retryAfterS: number; /** Late, not lost: the log keeps the row and writes it when it can (audit-gate.ts rowKept). */ kept: boolean }

/**
 * Emits the request's one row and waits until the sink has it (durable with the audit log's
 * writer). Never throws into the runner's caller: a refused row is reported loudly and counted,
 * and the outcome says so, so that the caller answers `audit_unavailable` instead of an answer
 * whose row does not exist. The log's back-pressure also closes the gate (audit-gate.ts).
 */
export async function terminal(core: ProxyCore, ctx: DecisionContext): Promise<TerminalOutcome> {
  if (ctx.emitted) {
    process.emitWarning('corral proxy: a second policy_decision for one request was suppressed', 'CorralProxyLifecycle')
    return { recorded: true }
  }
  ctx.emitted = true
  try {
    await core.audit.emit(decisionRow(ctx))
    core.auditGate.accepted()
    return { recorded: true }
  } catch (err) {
    core.counters.auditFailures++
    const retryAfterS = core.auditGate.refused(err)
    const e = err as { message?: string; code?: string }
    core.log.error(
      { err: { message: e?.message ?? String(err), code: e?.code }, reason: ctx.denial?.reason, decision: ctx.denial ? 'deny' : 'allow', org_id: ctx.attribution.org_id },
      'proxy: the audit sink refused a policy_decision row',
    )
    return { recorded: false, retryAfterS: retryAfterS ?? 1, kept: rowKept(err) }
  }
}
