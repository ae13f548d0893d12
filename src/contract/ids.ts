// Prefixed, time-sortable ids: `<prefix>_` + a UUIDv7 without dashes (creation order = id order).
// The prefixes are part of the API contract (control-plane.md "Resources"): a client tells a
// resource id from a name by its prefix, and no org id can collide with PLATFORM_ORG (`_platform`).
// Audit event ids are bare UUIDv7 (src/audit), not prefixed.
import { v7 as uuidv7 } from 'uuid'

export const ID_PREFIXES = {
  org: 'org',
  user: 'usr',
  invitation: 'inv',
  apiKey: 'key',
  provider: 'prov',
  agentRole: 'role',
  pack: 'pack',
  credential: 'cred',
  workspace: 'ws',
  task: 'task',
} as const
export type IdPrefix = (typeof ID_PREFIXES)[keyof typeof ID_PREFIXES]

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${uuidv7().replaceAll('-', '')}`
}

/** Now as RFC 3339 UTC with millisecond precision: the one date-time format every table stores. */
export function nowIso(): string {
  return new Date().toISOString()
}
