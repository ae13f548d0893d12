// Wire shapes of the /v1 routes the CLI uses (control-plane.md "Resources" and "Endpoints"): the
// responses are the contract's (src/contract/wire.ts, derived from the routes' own schemas); what is
// spelled here is the client's side only, the query parameters it sends.

import type {
  ApiKeyJson, AuditEvent, AuditOrder, CreatedApiKeyJson, MeJson, MembershipJson, MembershipRole, PermissionSet, StatsJson, TimeBucket,
} from '../contract/index.js'

export type { AuditEvent, AuditOrder, PermissionSet, TimeBucket }
export { PERMISSION_SETS, TIME_BUCKETS, MEMBERSHIP_ROLES as MEMBER_ROLES } from '../contract/index.js'
export type MemberRole = MembershipRole

export type ApiKey = ApiKeyJson
/** The create response is the only place the secret `value` ever appears. */
export type CreatedApiKey = CreatedApiKeyJson
export type Membership = MembershipJson
/** GET /v1/me: who the credential is, and the org it acts in. */
export type Me = MeJson

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

export type StatsResult = StatsJson
export type StatsBucket = StatsJson['buckets'][number]
