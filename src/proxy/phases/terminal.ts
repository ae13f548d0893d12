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
  // Built in the order the row's columns are read, one named store at a time: no spread of a
  // temporary object (this runs once per request).
  const row = { org_id: a.org_id, user_id: a.user_id, event_type: 'policy_decision' } as Mutable<NewAuditEvent>
  if (a.workspace_id) row.workspace_id = a.workspace_id
  if (a.task_id) row.task_id = a.task_id
  row.agent_role = a.agent_role ?? ''
  row.agent_provider = a.agent_provider ?? ''
  row.destination = ctx.destination
  row.method = ctx.method
  row.path = ctx.path
  row.decision = denial ? 'deny' : 'allow'
  row.latency_ms = ctx.latencyMs()
  row.transforms_applied = ctx.transformsApplied
  row.validations_applied = ctx.validationsApplied
  row.policy_type = 'http'
  row.phase = ctx.phase
  row.capability_name = ctx.capability ?? ''
  row.transforms_failed = { ...ctx.transformsFailed }
  row.auth_used = ctx.authUsed.slice()
  row.auth_failures = { ...ctx.authFailures }
  if (denial) {
    row.reason = denial.reason
    const detail: Record<string, unknown> = { ...ctx.callDetail, ...denial.detail }
    if (ALLOWRULE_EVAL_REASONS.has(denial.reason) && ctx.allowruleEval && !detail.allowrule_eval) detail.allowrule_eval = ctx.allowruleEval
    // Refused after the upstream answered (a request body over the limit while it streamed).
    if (ctx.upstreamStatus !== undefined) upstreamOutcome(ctx, detail)
    if (ctx.protocol !== undefined) streamOutcome(ctx, detail)
    if (Object.keys(detail).length) row.detail = detail
  } else {
    row.debits = { ...ctx.debits }
    row.budget_state = { ...ctx.budgetState }
    row.floored = { ...ctx.floored }
    // An allow was forwarded: the row says what the upstream answered and whether it all arrived,
    // so a 404 or a 500, or a stream cut short, does not read as a plain allow.
    // The allow rule that admitted it (its name, or `allow[i]`), as `caps test` and allowrule_eval name it.
    const detail: Record<string, unknown> = ctx.match ? { rule: ctx.match.ruleKey, ...ctx.callDetail, ...ctx.detail } : { ...ctx.callDetail, ...ctx.detail }
    upstreamOutcome(ctx, detail)
    if (ctx.protocol !== undefined) streamOutcome(ctx, detail)
    row.detail = detail
  }
  return row
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] }

/** Sets `detail.protocol` of an HTTP/2 stream, with `detail.grpc_status`/`grpc_message` when the client got one. */
function streamOutcome(ctx: DecisionContext, detail: Record<string, unknown>): void {
  detail.protocol = ctx.protocol!
  if (ctx.grpcStatus !== undefined) detail.grpc_status = ctx.grpcStatus
  if (ctx.grpcMessage !== undefined) detail.grpc_message = ctx.grpcMessage
}

/** Sets `detail.upstream_status` (when the upstream answered at all) and `detail.response_complete`. */
function upstreamOutcome(ctx: DecisionContext, detail: Record<string, unknown>): void {
  if (ctx.upstreamStatus !== undefined) detail.upstream_status = ctx.upstreamStatus
  detail.response_complete = ctx.responseComplete
}

/** Whether the request's row is recorded (durable, with the audit log's writer) or was refused. */
export type TerminalOutcome = { recorded: true } | { recorded: false; retryAfterS: number; /** Late, not lost: the log keeps the row and writes it when it can (audit-gate.ts rowKept). */ kept: boolean }

/**
 * Emits the request's one row and waits until the sink has it (durable with the audit log's
 * writer). Never throws into the runner's caller: a refused row is reported loudly and counted,
 * and the outcome says so, so that the caller answers `audit_unavailable` instead of an answer
 * whose row does not exist. The log's back-pressure also closes the gate (audit-gate.ts).
 */
export function terminal(core: ProxyCore, ctx: DecisionContext): Promise<TerminalOutcome> {
  if (ctx.emitted) {
    process.emitWarning('corral proxy: a second policy_decision for one request was suppressed', 'CorralProxyLifecycle')
    return Promise.resolve(RECORDED)
  }
  ctx.emitted = true
  let emitted: Promise<unknown>
  try {
    emitted = core.audit.emit(decisionRow(ctx))
  } catch (err) {
    return Promise.resolve(refused(core, ctx, err))
  }
  return emitted.then(() => {
    core.auditGate.accepted()
    return RECORDED
  }, (err: unknown) => refused(core, ctx, err))
}

const RECORDED: TerminalOutcome = Object.freeze({ recorded: true })

/** A refused row: reported loudly and counted; the outcome says whether the log still keeps it. */
function refused(core: ProxyCore, ctx: DecisionContext, err: unknown): TerminalOutcome {
  core.counters.auditFailures++
  const retryAfterS = core.auditGate.refused(err)
  const e = err as { message?: string; code?: string }
  core.log.error(
    { err: { message: e?.message ?? String(err), code: e?.code }, reason: ctx.denial?.reason, decision: ctx.denial ? 'deny' : 'allow', org_id: ctx.attribution.org_id },
    'proxy: the audit sink refused a policy_decision row',
  )
  return { recorded: false, retryAfterS: retryAfterS ?? 1, kept: rowKept(err) }
}
