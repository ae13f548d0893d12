// The /v1 response shapes as JSON schemas, each spelled once: the routes hand them to fastify (the
// serializer drops every field not listed here, so a column that is not listed, a hash or a
// secret, never leaves), and the TypeScript types the client, the CLI and the console read are
// derived from the same objects (FromSchema, at compile time only). A field added here is a field
// on the wire and in every caller's type. Enum values come from ./resources.ts.
import type { FromSchema } from 'json-schema-to-ts'
import {
  CREDENTIAL_TYPES, DESIRED_STATES, ENVIRONMENTS, THINKING_EFFORTS, MEMBERSHIP_ROLES, MEMBERSHIP_STATUSES, PERMISSION_SETS, POOL_POLICIES, POSTURES, PROVIDER_KINDS,
  ROLE_WARNING_CODES, TASK_STATUSES, WORKSPACE_STATES,
} from './resources.js'
import { AGENT_KINDS } from './agent-kinds.js'
import { QUANTITY_PATTERN, RESOURCE_NAMES, type ResourceName } from './role-resources.js'

const str = { type: 'string' } as const
const int = { type: 'integer' } as const
const dateTime = { type: 'string', format: 'date-time' } as const
const strings = { type: 'array', items: str } as const
const anyObject = { type: 'object', additionalProperties: true } as const
const oneOf = <const T extends readonly string[]>(values: T) => ({ type: 'string', enum: values }) as const

export const workspaceSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'role_id', 'role_name', 'provider_id', 'provider_name', 'state', 'created_by', 'task_count', 'created_at', 'updated_at'],
  properties: {
    id: str, org_id: str, role_id: str, role_name: str, provider_id: str, provider_name: str,
    state: oneOf(WORKSPACE_STATES), desired_state: oneOf(DESIRED_STATES),
    created_by: str, task_count: int, parent_workspace_id: str, fork_point_task_count: int, fork_source_snapshot_ref: str,
    has_snapshot: { type: 'boolean' }, pooled: { type: 'boolean' }, failure: str,
    created_at: dateTime, updated_at: dateTime, last_activity_at: dateTime, archived_at: dateTime,
  },
} as const
export type WorkspaceJson = FromSchema<typeof workspaceSchema>

export const taskSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'workspace_id', 'status', 'description', 'created_by', 'created_at', 'updated_at'],
  properties: {
    id: str, workspace_id: str, status: oneOf(TASK_STATUSES), reason: str, description: str, summary: str,
    options: anyObject, metadata: anyObject, uploads: strings,
    created_by: str, created_at: dateTime, updated_at: dateTime, started_at: dateTime, finished_at: dateTime,
  },
} as const
export type TaskJson = FromSchema<typeof taskSchema>

/** 202 of a task submission: the task is queued. */
export const taskAcceptedSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['task_id', 'workspace_id', 'status'],
  properties: { task_id: str, workspace_id: str, status: str },
} as const
export type TaskAcceptedJson = FromSchema<typeof taskAcceptedSchema>

/** One entry of a snapshot listing (control-plane.md "Snapshot file entry"): what the runtimes read from a snapshot and the API answers. */
export const snapshotFileEntrySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['path', 'size', 'is_dir', 'mtime', 'readonly'],
  // mtime: Unix-epoch seconds with fractional milliseconds.
  properties: { path: str, size: int, is_dir: { type: 'boolean' }, mtime: { type: 'number' }, readonly: { type: 'boolean' }, mime_type: str },
} as const
export type SnapshotFileEntry = FromSchema<typeof snapshotFileEntrySchema>

/** GET /v1/workspaces/{id}/snapshot/files. */
export const snapshotFilesSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['entries'],
  properties: { entries: { type: 'array', items: snapshotFileEntrySchema } },
} as const

const apiKeyProperties = {
  id: str, label: str, prefix: str, permission_set: oneOf(PERMISSION_SETS), created_by_user_id: str, created_at: dateTime, last_used_at: dateTime,
} as const

export const apiKeySchema = {
  type: 'object', additionalProperties: false, required: ['id', 'label', 'prefix', 'permission_set', 'created_at'], properties: apiKeyProperties,
} as const
export type ApiKeyJson = FromSchema<typeof apiKeySchema>

/** The create response: the only place the secret `value` ever appears. */
export const createdApiKeySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'label', 'prefix', 'permission_set', 'created_at', 'value'],
  properties: { ...apiKeyProperties, value: str },
} as const
export type CreatedApiKeyJson = FromSchema<typeof createdApiKeySchema>

export const membershipSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['org_id', 'user_id', 'email', 'role', 'status', 'created_at'],
  properties: {
    org_id: str, user_id: str, email: str, role: oneOf(MEMBERSHIP_ROLES), status: oneOf(MEMBERSHIP_STATUSES),
    invitation_id: str, invited_by: str, created_at: str, accepted_at: str, first_seen_at: str,
  },
} as const
export type MembershipJson = FromSchema<typeof membershipSchema>

/** GET /v1/me: who the credential is, and the org it acts in. */
export const meSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['org', 'kind', 'user_id', 'permissions'],
  properties: {
    org: { type: 'object', additionalProperties: false, required: ['id', 'name', 'posture'], properties: { id: str, name: str, posture: oneOf(POSTURES) } },
    kind: oneOf(CREDENTIAL_TYPES),
    user_id: str,
    email: str,
    role: oneOf(MEMBERSHIP_ROLES),
    key_id: str,
    permission_set: oneOf(PERMISSION_SETS),
    permissions: strings,
  },
} as const
export type MeJson = FromSchema<typeof meSchema>

export const providerSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'org_id', 'name', 'created_at', 'updated_at'],
  properties: {
    id: str, org_id: str, name: str, display_name: str, description: str, kind: oneOf(PROVIDER_KINDS), domain: str, base_url: str,
    default_model: str, created_by: str, created_at: dateTime, updated_at: dateTime, archived_at: dateTime,
  },
} as const
export type ProviderJson = FromSchema<typeof providerSchema>

/** Requests and limits, Kubernetes quantities (docs/roles.md "Resources"; a documented addition to the spec). */
const quantity = { type: 'string', maxLength: 32, pattern: QUANTITY_PATTERN } as const
const resourceList = {
  type: 'object', additionalProperties: false,
  properties: Object.fromEntries(RESOURCE_NAMES.map((n) => [n, quantity])) as Record<ResourceName, typeof quantity>,
} as const
export const roleResourcesSchema = { type: 'object', additionalProperties: false, properties: { requests: resourceList, limits: resourceList } } as const

/** On a role's create and update: credentials and secrets its policy names that the org lacks (docs/roles.md). */
export const roleWarningsSchema = {
  type: 'array',
  items: {
    type: 'object', additionalProperties: false, required: ['code', 'name', 'capabilities', 'message'],
    properties: { code: oneOf(ROLE_WARNING_CODES), name: str, capabilities: strings, message: str },
  },
} as const
export type RoleWarningJson = FromSchema<typeof roleWarningsSchema>[number]

export const agentRoleSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'org_id', 'name', 'provider_id', 'environment', 'pool_policy', 'pack_ids', 'created_at', 'updated_at'],
  properties: {
    id: str, org_id: str, name: str, display_name: str, description: str, provider_id: str, model: str, capabilities: str,
    environment: oneOf(ENVIRONMENTS), environment_description: str, task_timeout_seconds: int, idle_timeout_seconds: int,
    thinking_effort: oneOf(THINKING_EFFORTS), max_continuations: int, max_context_tokens: int,
    pool_policy: oneOf(POOL_POLICIES), pool_size: int, pool_max_size: int, pack_ids: strings, resources: roleResourcesSchema,
    agent_kind: oneOf(AGENT_KINDS), created_by: str, created_at: dateTime, updated_at: dateTime, archived_at: dateTime, warnings: roleWarningsSchema,
  },
} as const
export type AgentRoleJson = FromSchema<typeof agentRoleSchema>
