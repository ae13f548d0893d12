// The per-request DecisionContext (after smokescreen's canonical decision): every
// phase fills it, the runner records which phase is current, and the terminal phase turns it into
// exactly one `policy_decision` audit row. Field names are the spec's audit columns, defined once
// in src/contract/audit-vocabulary.ts.
import { DENY_MESSAGES, PLATFORM_ORG, SYSTEM_USER, type DenyReason, type FlooredReason, type Phase, type TransformFailure } from '../contract/index.js'
import type { AllowRuleEval, RuleMatch } from '../policy/index.js'
import type { TokenCheck } from '../secrets/index.js'

/** A policy outcome: the request is refused with a reason from the spec's closed list. */
export class PolicyDenial {
  constructor(
    readonly reason: DenyReason,
    readonly detail: Record<string, unknown> = {},
    /** HTTP status of the local reply; 403 unless the reason calls for another. */
    readonly status = 403,
    /** A reply in the protocol's own terms (an MCP call's JSON-RPC error) instead of the policy_denied envelope. */
    readonly reply?: LocalReply,
  ) {}
}

/** A local reply's status, content type and body, sent as given. */
export interface LocalReply {
  status: number
  contentType: string
  body: string
}

export function deny(reason: DenyReason, detail: Record<string, unknown> = {}, status = 403): PolicyDenial {
  return new PolicyDenial(reason, detail, status)
}

/** What a phase returns: continue (undefined) or a denial. */
export type PhaseOutcome = PolicyDenial | undefined

/**
 * Who the request is attributed to, once the token and workspace are known. Until a token has
 * verified (signature and expiry), nobody is: the row belongs to the platform scope
 * (`PLATFORM_ORG`, user `system`) and never to an org (docs/proxy.md, "Unattributed decisions").
 */
export interface Attribution {
  org_id: string
  user_id: string
  workspace_id?: string
  task_id?: string
  agent_role?: string
  agent_provider?: string
}

export class DecisionContext {
  readonly startedAt = performance.now()
  phase: Phase = 'request_headers'
  attribution: Attribution = { org_id: PLATFORM_ORG, user_id: SYSTEM_USER }
  destination: string
  method: string
  path: string
  capability?: string
  match?: RuleMatch
  transformsApplied = 0
  validationsApplied = 0
  transformsFailed: Record<string, TransformFailure> = {}
  authUsed: string[] = []
  authFailures: Record<string, TransformFailure> = {}
  debits: Record<string, number> = {}
  budgetState: Record<string, unknown> = {}
  floored: Record<string, FlooredReason> = {}
  allowruleEval?: AllowRuleEval[]
  denial?: PolicyDenial
  /** Extra detail for allows (e.g. an upstream failure after admission). */
  detail: Record<string, unknown> = {}
  /** What the request calls inside its protocol (an MCP message: server, method, tool), on its row whatever the decision. */
  callDetail?: Record<string, unknown>
  /** The upstream's response status, once its head arrived (the row's `detail.upstream_status`). */
  upstreamStatus?: number
  /** The upstream's body ended and was handed to the client whole (`detail.response_complete`). */
  responseComplete = false
  /** `h2` when the request arrived as an HTTP/2 stream (`detail.protocol`); unset for HTTP/1.1. */
  protocol?: 'h2'
  /** gRPC status the client got: the upstream's trailers, or the proxy's own deny (`detail.grpc_status`). */
  grpcStatus?: number
  /** The matching `grpc-message`, decoded (`detail.grpc_message`). */
  grpcMessage?: string
  /** Set by the terminal phase; a second emission is a bug and is refused there. */
  emitted = false

  constructor(init: { destination: string; method: string; path: string }) {
    this.destination = init.destination
    this.method = init.method
    this.path = init.path
  }

  latencyMs(): number {
    return Math.max(0, Math.round(performance.now() - this.startedAt))
  }
}

/**
 * Attributes a request from its token check: a verified token names its org and workspace; a
 * missing, forged or expired one leaves the row in the platform scope. Returns the denial for a
 * failed check (an expired but correctly signed token names its workspace in the detail, so an
 * operator reading the platform scope can tell whose token it was).
 */
export function attributeToken(ctx: DecisionContext, check: TokenCheck): PolicyDenial | undefined {
  if (check.ok) {
    const c = check.claims
    ctx.attribution = withFields(ctx.attribution, c.org_id, ctx.attribution.user_id, c.workspace_id, c.task_id)
    return undefined
  }
  ctx.attribution = { org_id: PLATFORM_ORG, user_id: SYSTEM_USER }
  return check.expired
    ? deny(check.reason, { expired: true, token_org_id: check.expired.org_id, token_workspace_id: check.expired.workspace_id })
    : deny(check.reason)
}

/**
 * A copy of `a` with the given fields set (undefined keeps a's), written out instead of a spread:
 * attributions take several shapes, and a spread of them costs a generic runtime copy per request.
 */
export function withFields(a: Attribution, orgId: string, userId: string, workspaceId?: string, taskId?: string, role?: string, provider?: string): Attribution {
  const out: Attribution = { org_id: orgId, user_id: userId }
  const ws = workspaceId ?? a.workspace_id
  if (ws !== undefined) out.workspace_id = ws
  const task = taskId || a.task_id
  if (task !== undefined) out.task_id = task
  const r = role ?? a.agent_role
  if (r !== undefined) out.agent_role = r
  const p = provider ?? a.agent_provider
  if (p !== undefined) out.agent_provider = p
  return out
}

/**
 * Detail keys written to the decision row but kept from the agent: a refused address would turn
 * the proxy into a resolver of internal names for the agent.
 */
const ROW_ONLY_DETAIL = new Set(['address'])

/** The JSON body of a local deny reply: enough for an agent to act, nothing secret. */
export function denyBody(ctx: DecisionContext, denial: PolicyDenial): string {
  const capability = ctx.capability ?? (typeof denial.detail.capability === 'string' ? denial.detail.capability : undefined)
  let detail = denial.detail
  if (Object.keys(detail).some((k) => ROW_ONLY_DETAIL.has(k))) detail = Object.fromEntries(Object.entries(detail).filter(([k]) => !ROW_ONLY_DETAIL.has(k)))
  return JSON.stringify({
    error: {
      code: 'policy_denied',
      reason: denial.reason,
      message: DENY_MESSAGES[denial.reason],
      ...(capability ? { capability } : {}),
      phase: ctx.phase,
      ...(Object.keys(detail).length ? { detail } : {}),
    },
  })
}

export { DENY_MESSAGES }
