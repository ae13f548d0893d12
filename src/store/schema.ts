// The database's table types, composed from one interface per table. Kysely types every query
// against `Database`; a part that adds tables (proxy, workspaces) declares its own interface in
// its own file and adds one line to `Database` below, next to its migration in migrations/index.ts.
//
// Conventions (docs/storage.md): ids are prefixed text, date-times are RFC 3339 text in UTC with
// millisecond precision (lexically sortable in both dialects), JSON columns are TEXT on SQLite and
// JSONB on Postgres (the repositories accept either on read).

import type { ColumnType } from 'kysely'

/** A JSON column: written as a string (SQLite) or a value (Postgres JSONB), read as either. */
export type JsonColumn = ColumnType<unknown, string | null | undefined, string | null>

export interface OrgsTable {
  id: string
  name: string
  posture: string
  created_at: string
}

export interface UsersTable {
  id: string
  email: string
  created_at: string
}

export interface MembershipsTable {
  org_id: string
  user_id: string
  email: string
  role: string
  status: string
  invitation_id: string
  invited_by: string | null
  created_at: string
  accepted_at: string | null
  first_seen_at: string | null
}

export interface ApiKeysTable {
  id: string
  org_id: string
  label: string
  prefix: string
  permission_set: string
  created_by_user_id: string | null
  secret_hash: string
  created_at: string
  last_used_at: string | null
}

export interface SettingsTable {
  key: string
  value: string
}

export interface WebhookNoncesTable {
  nonce: string
  expires_at: string
}

export interface AuditEventsTable {
  id: string
  org_id: string
  user_id: string
  timestamp: string
  /** Epoch milliseconds of `timestamp`: the sort, range and bucketing key (bigint on Postgres). */
  ts: ColumnType<number | string, number, never>
  event_type: string
  category: string
  actor: string
  workspace_id: string | null
  task_id: string | null
  agent_role: string | null
  agent_provider: string | null
  destination: string | null
  method: string | null
  path: string | null
  decision: string | null
  reason: string | null
  latency_ms: number | null
  transforms_applied: number | null
  validations_applied: number | null
  policy_type: string | null
  phase: string | null
  capability_name: string | null
  detail: JsonColumn
  debits: JsonColumn
  budget_state: JsonColumn
  floored: JsonColumn
  transforms_failed: JsonColumn
  auth_used: JsonColumn
  auth_failures: JsonColumn
}

/** Events the audit writer could not store as rows (src/audit/encode.ts), kept as text. */
export interface AuditQuarantineTable {
  id: string
  org_id: string | null
  reason: string
  event: string
  quarantined_at: string
  ts: ColumnType<number | string, number, never>
}

export interface Database {
  orgs: OrgsTable
  users: UsersTable
  memberships: MembershipsTable
  api_keys: ApiKeysTable
  settings: SettingsTable
  webhook_nonces: WebhookNoncesTable
  audit_events: AuditEventsTable
  audit_quarantine: AuditQuarantineTable
}
