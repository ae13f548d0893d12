// The audit event: one row of the append-only audit log, and the closed vocabularies the spec
// defines for it (control-plane.md, "Audit event" and "Events"). Every producer (server routes,
// proxy, runtime, agent callback) builds rows with these types; wire names are defined here once.

export const CATEGORIES = ['audit', 'activity'] as const
export type Category = (typeof CATEGORIES)[number]

export const ACTORS = ['control-plane', 'policy-engine', 'agent'] as const
export type Actor = (typeof ACTORS)[number]

/** What the vocabulary fixes for one event type: its category and who records it. */
export interface EventKind {
  readonly category: Category
  /** The actor of the spec's Events section; emitting fills it in. */
  readonly actor: Actor
  /** Other actors that may record this type, named at the emit that does (see `credential_status`). */
  readonly alsoBy?: readonly Actor[]
}

const config: EventKind = { category: 'audit', actor: 'control-plane' }
const lifecycle: EventKind = { category: 'activity', actor: 'control-plane' }
const proxied: EventKind = { category: 'activity', actor: 'policy-engine' }
const agent: EventKind = { category: 'activity', actor: 'agent' }

/**
 * Every event type with its category and actor (control-plane.md "Events"): the one table a
 * producer relies on, so an emit names only what varies (type, org, user, ids, detail).
 */
export const EVENT_KINDS = {
  // configuration mutations
  provider_created: config, provider_updated: config, provider_deleted: config, provider_archived: config, provider_unarchived: config,
  agent_role_created: config, agent_role_updated: config, agent_role_deleted: config, agent_role_archived: config, agent_role_unarchived: config,
  content_pack_created: config, content_pack_updated: config, content_pack_deleted: config, content_pack_cloned: config,
  credential_created: config, credential_deleted: config, credential_authorized: config,
  // a status flip made by the control plane (re-consent) or by the proxy's refresh (docs/credentials.md)
  credential_status: { ...config, alsoBy: ['policy-engine'] },
  secret_created: config, secret_deleted: config,
  api_key_created: config, api_key_revoked: config,
  membership_invited: config, membership_accepted: config, membership_updated: config, membership_removed: config, membership_first_seen: config,
  workspace_forked: config, workspace_fork_created: config,
  // not in the spec's catalog: a capability token handed to an operator (POST /v1/workspaces/{id}/proxy-token)
  proxy_token_minted: config,
  // workspace and task lifecycle
  workspace_created: lifecycle, workspace_provisioned: lifecycle, workspace_activated: proxied, workspace_deactivated: proxied,
  workspace_evicted: proxied, workspace_restarted: lifecycle, workspace_stopped: lifecycle, workspace_archived: lifecycle,
  workspace_unarchived: lifecycle, task_submitted: lifecycle, task_completed: lifecycle,
  // proxy decisions
  policy_decision: { category: 'audit', actor: 'policy-engine' },
  // agent events
  session_start: agent, session_end: agent, session_wrap_up: agent, task_start: agent, task_end: agent, iteration_start: agent,
  iteration_end: agent, agent_thinking: agent, agent_response: agent, current_status: agent, tool_call: agent, tool_result: agent,
  compaction_start: agent, compaction_end: agent, step_status: agent, progress_status: agent, file_change: agent,
} as const satisfies Record<string, EventKind>
export type EventType = keyof typeof EVENT_KINDS
export const EVENT_TYPES = Object.keys(EVENT_KINDS) as readonly EventType[]

export const AGENT_EVENT_TYPES = [
  'session_start', 'session_end', 'session_wrap_up', 'task_start', 'task_end', 'iteration_start', 'iteration_end',
  'agent_thinking', 'agent_response', 'current_status', 'tool_call', 'tool_result', 'compaction_start',
  'compaction_end', 'step_status', 'progress_status', 'file_change',
] as const satisfies readonly EventType[]
export type AgentEventType = (typeof AGENT_EVENT_TYPES)[number]

export const PHASES = ['request_headers', 'request_body', 'response_headers', 'response_body', 'dns'] as const
export type Phase = (typeof PHASES)[number]

export const POLICY_TYPES = ['http', 'dns'] as const
export type PolicyType = (typeof POLICY_TYPES)[number]

export const DECISIONS = ['allow', 'deny'] as const
export type Decision = (typeof DECISIONS)[number]

/**
 * The deny reasons (closed enum of `reason`): the spec's sixteen, then corral's extensions for
 * classes of denial the spec has no word for (docs/proxy.md "Deny reasons beyond the spec"):
 * a destination address the policy never named (loopback, private, serve's own listeners), a path
 * that has no single canonical form, a decision that could not be made durable, and a per-workspace
 * resource limit of the proxy.
 */
export const DENY_REASONS = [
  'no_scheme', 'no_token', 'invalid_token', 'workspace_not_activated', 'workspace_gone', 'no_policy',
  'policy_error', 'policy_empty', 'policy_type_error', 'no_match', 'invalid_json', 'format_mismatch',
  'schema_violation', 'budget_exhausted', 'concurrency_exhausted', 'internal_error',
  'destination_private', 'path_ambiguous', 'audit_unavailable', 'limit_exceeded',
] as const
export type DenyReason = (typeof DENY_REASONS)[number]

/** Values of `transforms_failed.<key>` and `auth_failures.<credential>`. */
export const TRANSFORM_FAILURES = [
  'compile_error', 'eval_error', 'type_mismatch', 'apply_error', 'body_absent', 'auth_unavailable',
] as const
export type TransformFailure = (typeof TRANSFORM_FAILURES)[number]

/** Values of `floored.<counter>`. */
export const FLOORED_REASONS = [
  'framing_mismatch', 'format_mismatch', 'encoding_mismatch', 'parse_failed', 'cel_eval_error',
  'extracted_below_failure_charge', 'terminator_not_observed',
] as const
export type FlooredReason = (typeof FLOORED_REASONS)[number]

/** `user_id` of API-key requests and identity-provider-webhook-driven events. */
export const SYSTEM_USER = 'system'

/**
 * `org_id` of rows no org can be named for (a proxy request with no token, a token that failed
 * verification, bytes that were not HTTP). No org id has this shape (ids are `org_…`), so no org's
 * audit API ever returns these rows; operators read them with `corral admin audit` (docs/proxy.md).
 */
export const PLATFORM_ORG = '_platform'

/** One stored audit row, exactly the spec's columns. Optional columns are absent when not populated. */
export interface AuditEvent {
  id: string // UUIDv7
  org_id: string
  user_id: string
  timestamp: string // RFC 3339, set at the source
  event_type: EventType
  category: Category
  actor: Actor
  workspace_id?: string
  task_id?: string
  agent_role?: string
  agent_provider?: string
  destination?: string
  method?: string
  path?: string
  decision?: Decision
  reason?: DenyReason
  latency_ms?: number
  transforms_applied?: number
  validations_applied?: number
  policy_type?: PolicyType
  phase?: Phase
  capability_name?: string
  detail?: Record<string, unknown>
  debits?: Record<string, number>
  budget_state?: Record<string, unknown>
  floored?: Record<string, FlooredReason>
  transforms_failed?: Record<string, TransformFailure>
  auth_used?: string[]
  auth_failures?: Record<string, TransformFailure>
}

/**
 * What a producer hands to the audit writer: id and timestamp are filled at the source when
 * omitted, category and actor from EVENT_KINDS (an actor is named only where the type lists it in
 * `alsoBy`).
 */
export type NewAuditEvent = Omit<AuditEvent, 'id' | 'timestamp' | 'category' | 'actor'> & {
  id?: string
  timestamp?: string
  category?: Category
  actor?: Actor
}

/** The one way every part of corral records an event. Implemented by src/audit's batched writer. */
export interface AuditSink {
  /**
   * Stamps id (UUIDv7) and timestamp now and resolves once the event is durable (journal or
   * database). Never throws for a bad event (it is quarantined); rejects only with
   * AuditUnavailableError (src/audit/unavailable.ts), at once, when the log cannot take it.
   */
  emit(event: NewAuditEvent): Promise<AuditEvent>
  /**
   * Whether an event emitted now can be made durable (the audit writer's journal has room and its
   * last write and sync succeeded, or the database is taking rows). Read before a side effect that
   * must not happen unrecorded (the proxy forwarding a request); absent: assumed writable.
   */
  writable?(): boolean
  /** Throws AuditUnavailableError when an event emitted now would be refused (a full queue, a closed writer). */
  admit?(): void
  /** Resolves once every event acknowledged so far is in the database (the journaled writer's batches). */
  flush?(): Promise<void>
}

/** Columns `filter` accepts on audit queries and stats (spec, GET /v1/audit). `counter` is virtual. */
export const FILTER_COLUMNS = [
  'workspace_id', 'task_id', 'decision', 'destination', 'capability_name', 'event_type', 'category', 'agent_role',
  'agent_provider', 'method', 'path', 'actor', 'counter', 'phase', 'policy_type',
] as const
export type FilterColumn = (typeof FILTER_COLUMNS)[number]
