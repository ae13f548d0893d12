// The terminal phase: turns the DecisionContext into exactly one `policy_decision` row. It runs
// for every request that reached the proxy, allowed or denied, and refuses to emit twice (a second
// call is a lifecycle bug, like undici's handler asserts; it is reported, never written).
import type { NewAuditEvent } from '../../contract/index.js'
import type { DecisionContext } from '../decision.js'
import { rowKept } from '../audit-gate.js'
import type { ProxyCore } from '../request-state.js'

const ALLOWRULE_EVAL_REASONS = new Set(['no_match', 'schema_violation', 'format_mismatch', 'no_scheme'])

export function decisionRow(ctx: DecisionContext): NewAuditEvent {
  return new DecisionRow(ctx)
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] }

// The row's columns are the interface's; the class only sets them. Optional columns a row does not
// carry stay absent (never undefined), as the audit writer expects.
interface DecisionRow extends Mutable<NewAuditEvent> {}

/**
 * One request's row, every column set in the constructor in the order the columns are read: a
 * class instance gets room for all of them in one allocation, where an object literal grown one
 * column at a time reallocates its property store as it grows (this runs once per request).
 */
class DecisionRow {
  constructor(ctx: DecisionContext) {
    const a = ctx.attribution
    const denial = ctx.denial
    this.org_id = a.org_id
    this.user_id = a.user_id
    this.event_type = 'policy_decision'
    if (a.workspace_id) this.workspace_id = a.workspace_id
    if (a.task_id) this.task_id = a.task_id
    this.agent_role = a.agent_role ?? ''
    this.agent_provider = a.agent_provider ?? ''
    this.destination = ctx.destination
    this.method = ctx.method
    this.path = ctx.path
    this.decision = denial ? 'deny' : 'allow'
    this.latency_ms = ctx.latencyMs()
    this.transforms_applied = ctx.transformsApplied
    this.validations_applied = ctx.validationsApplied
    this.policy_type = 'http'
    this.phase = ctx.phase
    this.capability_name = ctx.capability ?? ''
    // The context's own objects, not copies: they are the request's, complete by the time any row
    // is built (transforms and credentials come before every row; settle makes fresh budget objects).
    this.transforms_failed = ctx.transformsFailed
    this.auth_used = ctx.authUsed
    this.auth_failures = ctx.authFailures
    if (denial) {
      this.reason = denial.reason
      const detail: Record<string, unknown> = { ...ctx.callDetail, ...denial.detail }
      if (ALLOWRULE_EVAL_REASONS.has(denial.reason) && ctx.allowruleEval && !detail.allowrule_eval) detail.allowrule_eval = ctx.allowruleEval
      // Refused after the upstream answered (a request body over the limit while it streamed).
      if (ctx.upstreamStatus !== undefined) upstreamOutcome(ctx, detail)
      if (ctx.protocol !== undefined) streamOutcome(ctx, detail)
      if (Object.keys(detail).length) this.detail = detail
    } else {
      this.debits = ctx.debits
      this.budget_state = ctx.budgetState
      this.floored = ctx.floored
      // An allow was forwarded: the row says what the upstream answered and whether it all arrived,
      // so a 404 or a 500, or a stream cut short, does not read as a plain allow.
      // The allow rule that admitted it (its name, or `allow[i]`), as `caps test` and allowrule_eval name it.
      const detail: Record<string, unknown> = ctx.match ? { rule: ctx.match.ruleKey, ...ctx.callDetail, ...ctx.detail } : { ...ctx.callDetail, ...ctx.detail }
      upstreamOutcome(ctx, detail)
      if (ctx.protocol !== undefined) streamOutcome(ctx, detail)
      this.detail = detail
    }
  }
}


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
