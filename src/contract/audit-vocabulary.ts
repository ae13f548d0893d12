// The audit event: one row of the append-only audit log, and the closed vocabularies the spec
// defines for it (control-plane.md, "Audit event" and "Events"). Every producer (server routes,
// proxy, runtime, agent callback) builds rows with these types; wire names are defined here once.

export const EVENT_TYPES = [
  // configuration mutations (category audit, actor control-plane)
  'provider_created', 'provider_updated', 'provider_deleted', 'provider_archived', 'provider_unarchived',
  'agent_role_created', 'agent_role_updated', 'agent_role_deleted', 'agent_role_archived', 'agent_role_unarchived',
  'content_pack_created', 'content_pack_updated', 'content_pack_deleted', 'content_pack_cloned',
  'credential_created', 'credential_deleted', 'credential_authorized', 'credential_status',
  'secret_created', 'secret_deleted',
  'api_key_created', 'api_key_revoked',
  'membership_invited', 'membership_accepted', 'membership_updated', 'membership_removed', 'membership_first_seen',
  'workspace_forked', 'workspace_fork_created',
  // not in the spec's catalog: a capability token handed to an operator (POST /v1/workspaces/{id}/proxy-token)
  'proxy_token_minted',
  // workspace and task lifecycle (category activity)
  'workspace_created', 'workspace_provisioned', 'workspace_activated', 'workspace_deactivated', 'workspace_evicted',
  'workspace_restarted', 'workspace_stopped', 'workspace_archived', 'workspace_unarchived',
  'task_submitted', 'task_completed',
  // proxy decisions (category audit, actor policy-engine)
  'policy_decision',
  // agent events (category activity, actor agent)
  'session_start', 'session_end', 'session_wrap_up', 'task_start', 'task_end', 'iteration_start', 'iteration_end',
  'agent_thinking', 'agent_response', 'current_status', 'tool_call', 'tool_result', 'compaction_start',
  'compaction_end', 'step_status', 'progress_status', 'file_change',
] as const
export type EventType = (typeof EVENT_TYPES)[number]

export const AGENT_EVENT_TYPES = [
  'session_start', 'session_end', 'session_wrap_up', 'task_start', 'task_end', 'iteration_start', 'iteration_end',
  'agent_thinking', 'agent_response', 'current_status', 'tool_call', 'tool_result', 'compaction_start',
  'compaction_end', 'step_status', 'progress_status', 'file_change',
] as const satisfies readonly EventType[]
export type AgentEventType = (typeof AGENT_EVENT_TYPES)[number]

export const CATEGORIES = ['audit', 'activity'] as const
export type Category = (typeof CATEGORIES)[number]

export const ACTORS = ['control-plane', 'policy-engine', 'agent'] as const
export type Actor = (typeof ACTORS)[number]

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

/** What a producer hands to the audit writer: id and timestamp are filled at the source when omitted. */
export type NewAuditEvent = Omit<AuditEvent, 'id' | 'timestamp'> & { id?: string; timestamp?: string }

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
}

/** Columns `filter` accepts on audit queries and stats (spec, GET /v1/audit). `counter` is virtual. */
export const FILTER_COLUMNS = [
  'workspace_id', 'task_id', 'decision', 'destination', 'capability_name', 'event_type', 'category', 'agent_role',
  'agent_provider', 'method', 'path', 'actor', 'counter', 'phase', 'policy_type',
] as const
export type FilterColumn = (typeof FILTER_COLUMNS)[number]
