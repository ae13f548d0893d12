// The contract: corral's shared vocabulary, a leaf that imports nothing from src/ (only `uuid` for
// ids). Every part (store, audit, policy, proxy, workspaces, server, client, agent, cli) speaks
// these words, so it sits below all of them and no part has to import another to name an error
// code, an audit event type or a filter (docs/design.md "Contract").
export {
  CorralError, ERROR_CATALOGUE, apiError, notFound, envelopeSchema, type ErrorCode, type ErrorEnvelope, type ErrorBody,
} from './errors.js'
export {
  EVENT_KINDS, EVENT_TYPES, AGENT_EVENT_TYPES, CATEGORIES, ACTORS, PHASES, POLICY_TYPES, DECISIONS, DENY_REASONS,
  TRANSFORM_FAILURES, FLOORED_REASONS, SYSTEM_USER, PLATFORM_ORG, FILTER_COLUMNS,
  type EventKind, type EventType, type AgentEventType, type Category, type Actor, type Phase, type PolicyType, type Decision,
  type DenyReason, type TransformFailure, type FlooredReason, type AuditEvent, type NewAuditEvent, type AuditSink,
  type FilterColumn,
} from './audit-vocabulary.js'
export {
  parseFilters, parseFilter, matchesFilters, MAX_FILTERS, MAX_FILTER_VALUES, MAX_FILTER_VALUE_LENGTH,
  type AuditFilterClause, type FilterInput,
} from './filter.js'
export type { PackAgent, PackManifest } from './pack-manifest.js'
export { ID_PREFIXES, newId, nowIso, type IdPrefix } from './ids.js'
export { INPUT_LIMITS, inputProblem, stringProblem, assertCleanInput, invalidInput, type InputProblem } from './input-limits.js'
export {
  CONTROL_HOST, type CapabilityClaims, type ControlReply, type AgentEventCharge, type AgentCallbackHandler,
} from './agent-callbacks.js'
export {
  THINKING_EFFORTS, ENVIRONMENTS, TASK_OUTCOME_STATUSES, type ThinkingEffort, type Environment, type AgentTask, type TaskStatus, type TaskOutcome, type AgentDefaults,
} from './agent-task.js'
export { AGENT_KINDS, AGENT_KIND_PROVIDERS, AGENT_CLIS, CLI_AGENT_KINDS, SANDBOX_AGENT_CLI_DIR, isCliAgentKind, type AgentKind, type AgentCliPackage, type CliAgentKind } from './agent-kinds.js'
export { DENY_MESSAGES, denyReasonIn } from './deny-messages.js'
export { QUANTITY_PATTERN, RESOURCE_NAMES, quantityValue, requestOverLimit, type ResourceList, type ResourceName, type RoleResources } from './role-resources.js'
export {
  PERMISSION_SETS, MEMBERSHIP_ROLES, MEMBERSHIP_STATUSES, CREDENTIAL_TYPES, POSTURES, WORKSPACE_STATES, DESIRED_STATES, TASK_STATUSES,
  TERMINAL_TASK_STATUSES, PROVIDER_KINDS, POOL_POLICIES, ROLE_WARNING_CODES, PACK_TIERS, PACK_VISIBILITIES, PACK_ORIGINS, AUDIT_ORDERS,
  TIME_BUCKETS, type PermissionSet, type MembershipRole, type MembershipStatus, type CredentialType, type Posture, type WorkspaceState,
  type DesiredState, type TaskLifecycleStatus, type ProviderKind, type PoolPolicy, type RoleWarningCode, type PackTier, type PackVisibility,
  type PackOrigin, type AuditOrder, type TimeBucket,
} from './resources.js'
export {
  workspaceSchema, taskSchema, taskAcceptedSchema, apiKeySchema, createdApiKeySchema, membershipSchema, meSchema, providerSchema,
  agentRoleSchema, roleResourcesSchema, roleWarningsSchema, snapshotFileEntrySchema, snapshotFilesSchema, type WorkspaceJson, type TaskJson,
  type TaskAcceptedJson, type ApiKeyJson, type CreatedApiKeyJson, type MembershipJson, type MeJson, type ProviderJson, type AgentRoleJson,
  type RoleWarningJson, type SnapshotFileEntry,
} from './wire.js'
export { auditEventSchema, auditPageSchema, statsSchema, type StatsJson } from './wire-audit.js'
export { checkpointListSchema, checkpointSchema, consistencyProofSchema, inclusionProofSchema, logPageSchema, unloggedSchema } from './wire-audit-log.js'
