// Wire shapes of the /v1 routes the CLI uses (control-plane.md "Resources" and "Endpoints").
// Audit rows reuse the one audit event contract in src/contract/audit-vocabulary.ts.

import type { AuditEvent } from '../contract/index.js'

export type { AuditEvent }

export const PERMISSION_SETS = ['full_access', 'submit_observe', 'read_only'] as const
export type PermissionSet = (typeof PERMISSION_SETS)[number]

export interface ApiKey {
  id: string
  label: string
  prefix: string
  permission_set: PermissionSet
  created_by_user_id?: string
  created_at: string
  last_used_at?: string
}

/** The create response is the only place the secret `value` ever appears. */
export interface CreatedApiKey extends ApiKey {
  value: string
}

export const MEMBER_ROLES = ['owner', 'admin', 'member'] as const
export type MemberRole = (typeof MEMBER_ROLES)[number]

export interface Membership {
  org_id: string
  user_id: string
  email: string
  role: MemberRole
  status: 'pending' | 'active'
  invitation_id?: string
  invited_by?: string
  created_at: string
  accepted_at?: string
  first_seen_at?: string
}

/** GET /v1/me: who the credential is, and the org it acts in. */
export interface Me {
  org: { id: string; name: string; posture?: string }
  kind: 'api_key' | 'session'
  user_id: string
  permissions: string[]
  email?: string
  role?: MemberRole
  key_id?: string
  permission_set?: PermissionSet
}

export type AuditOrder = 'asc' | 'desc'

/** Query parameters shared by GET /v1/audit and its workspace variant. */
export interface AuditQuery {
  filter?: readonly string[]
  from?: string
  to?: string
  order?: AuditOrder
  limit?: number
  cursor?: string
}

export interface AuditPage {
  events: AuditEvent[]
  /** Present only when the page filled the requested limit. */
  cursor?: string
}

export const TIME_BUCKETS = ['auto', '5m', '15m', '1h', '6h', '1d'] as const
export type TimeBucket = (typeof TIME_BUCKETS)[number]

/** Query parameters of GET /v1/audit/stats and its workspace variant. */
export interface StatsQuery {
  group_by?: string
  time_bucket?: TimeBucket
  bucket_by?: string
  metric?: string
  top?: string
  filter?: readonly string[]
  from?: string
  to?: string
}

export interface StatsBucket {
  group: Record<string, string>
  bucket?: string
  value: number
}

export interface StatsResult {
  buckets: StatsBucket[]
}
