// The closed vocabularies of the /v1 resources (control-plane.md "Resources"): each spelled once,
// here. The store's columns, the routes' schemas (src/contract/wire.ts), the client, the CLI's
// flags and the console all take them from this file; test/contract/one-spelling.test.ts fails
// when one of them is written out again anywhere else in src/.

/** What an API key may do (spec "API keys"). */
export const PERMISSION_SETS = ['full_access', 'submit_observe', 'read_only'] as const
export type PermissionSet = (typeof PERMISSION_SETS)[number]

/** A member's role in an org (spec "Memberships"). */
export const MEMBERSHIP_ROLES = ['owner', 'admin', 'member'] as const
export type MembershipRole = (typeof MEMBERSHIP_ROLES)[number]
export const MEMBERSHIP_STATUSES = ['pending', 'active'] as const
export type MembershipStatus = (typeof MEMBERSHIP_STATUSES)[number]

/** How a caller authenticated (GET /v1/me `kind`). */
export const CREDENTIAL_TYPES = ['api_key', 'session'] as const
export type CredentialType = (typeof CREDENTIAL_TYPES)[number]

/** An org's billing posture (spec "Billing posture"). */
export const POSTURES = ['active', 'past_due', 'decommissioning', 'trial_expired'] as const
export type Posture = (typeof POSTURES)[number]

/** Where a workspace is (its `state`) and where the controller drives it (`desired_state`). */
export const WORKSPACE_STATES = ['provisioning', 'idle', 'busy', 'stopping', 'stopped', 'archived'] as const
export type WorkspaceState = (typeof WORKSPACE_STATES)[number]
export const DESIRED_STATES = ['running', 'stopped', 'archived'] as const
export type DesiredState = (typeof DESIRED_STATES)[number]

/** A task's lifecycle; the last three are final. */
export const TASK_STATUSES = ['submitted', 'running', 'completed', 'failed', 'cancelled'] as const
export type TaskLifecycleStatus = (typeof TASK_STATUSES)[number]
export const TERMINAL_TASK_STATUSES: readonly TaskLifecycleStatus[] = TASK_STATUSES.slice(2)

/** How hard the model thinks, and which environment a role's agent is told it works in. */
export const THINKING_EFFORTS = ['high', 'medium', 'low', 'off'] as const
export type ThinkingEffort = (typeof THINKING_EFFORTS)[number]
export const ENVIRONMENTS = ['development', 'staging', 'production'] as const
export type Environment = (typeof ENVIRONMENTS)[number]

/**
 * The model APIs a provider speaks: Anthropic Messages, OpenAI-compatible (Chat Completions and
 * Responses), Gemini (generateContent). Which agent kinds speak which is AGENT_KIND_PROVIDERS.
 */
export const PROVIDER_KINDS = ['anthropic', 'openai', 'gemini'] as const
export type ProviderKind = (typeof PROVIDER_KINDS)[number]

/**
 * Which agent a role's workspaces run (docs/roles.md "Agent kind"): `corral` is the reference agent;
 * the others are agent CLIs run by an adapter (./agent-kinds.ts).
 */
export const AGENT_KINDS = ['corral', 'claude-code', 'codex', 'gemini-cli', 'opencode'] as const
export type AgentKind = (typeof AGENT_KINDS)[number]

/** The provider kinds (wire formats) each agent kind can talk to; a role pairing others is refused. */
export const AGENT_KIND_PROVIDERS = {
  corral: ['anthropic', 'openai'],
  'claude-code': ['anthropic'],
  codex: ['openai'],
  'gemini-cli': ['gemini'],
  opencode: ['anthropic', 'openai'],
} as const satisfies Readonly<Record<AgentKind, readonly ProviderKind[]>>

/** A role's warm pool; the empty string means "no warm pool". */
export const POOL_POLICIES = ['', 'static', 'dynamic'] as const
export type PoolPolicy = (typeof POOL_POLICIES)[number]

/** What a role create/update warns about: policy names the org lacks. */
export const ROLE_WARNING_CODES = ['missing_credential', 'missing_secret'] as const
export type RoleWarningCode = (typeof ROLE_WARNING_CODES)[number]

/** Content packs (spec "Packs"). */
export const PACK_TIERS = ['recommended', 'verified', 'community'] as const
export type PackTier = (typeof PACK_TIERS)[number]
export const PACK_VISIBILITIES = ['org', 'community'] as const
export type PackVisibility = (typeof PACK_VISIBILITIES)[number]
export const PACK_ORIGINS = ['upload', 'image_ref', 'clone'] as const
export type PackOrigin = (typeof PACK_ORIGINS)[number]

/** GET /v1/audit `order` and GET /v1/audit/stats `time_bucket`. */
export const AUDIT_ORDERS = ['asc', 'desc'] as const
export type AuditOrder = (typeof AUDIT_ORDERS)[number]
export const TIME_BUCKETS = ['auto', '5m', '15m', '1h', '6h', '1d'] as const
export type TimeBucket = (typeof TIME_BUCKETS)[number]
