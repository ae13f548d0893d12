// Permission strings, the API-key permission-set templates and the default membership roles, in
// one place (spec "Authentication" 5-9; the mappings the spec leaves open are ours and are
// documented in docs/permissions.md, which test/server/permissions.test.ts keeps in step). The closed enums stored in the api_keys and memberships tables (permission
// sets, roles) are the store's, re-exported here.
import { MEMBERSHIP_ROLES as ROLES, PERMISSION_SETS, type MembershipRole as Role, type PermissionSet } from '../contract/index.js'

export { PERMISSION_SETS, ROLES, type PermissionSet, type Role }

export const PERMISSIONS = [
  'apikeys:write',
  'audit:read',
  'audit:read:own',
  'workspace:read',
  'workspace:read:own',
  'workspace:write',
  'workspace:write:own',
  'tasks:write',
  'tasks:write:own',
  'caps:write',
  'auth:write',
  'auth:write:own',
] as const
export type Permission = (typeof PERMISSIONS)[number]


/** What an API key created with each template may do. */
export const PERMISSION_SET_GRANTS: Readonly<Record<PermissionSet, readonly Permission[]>> = Object.freeze({
  // Everything, including unscoped tasks:write: automation acting for the whole org.
  full_access: PERMISSIONS,
  // CI / integrations: start and follow up its own work, observe everything.
  submit_observe: ['audit:read', 'workspace:read', 'workspace:write:own', 'tasks:write:own'],
  // Dashboards and exporters.
  read_only: ['audit:read', 'workspace:read'],
})

/**
 * Default roles of org members (session tokens). No role holds unscoped `tasks:write` (spec
 * Authentication 5); all hold the `:own` variants. Owner and admin differ only in the owner-only
 * acts (granting, changing or removing the owner role; full_access keys), enforced in the routes.
 */
export const ROLE_GRANTS: Readonly<Record<Role, readonly Permission[]>> = Object.freeze({
  owner: [
    'apikeys:write', 'audit:read', 'audit:read:own', 'workspace:read', 'workspace:read:own', 'workspace:write',
    'workspace:write:own', 'tasks:write:own', 'caps:write', 'auth:write', 'auth:write:own',
  ],
  admin: [
    'apikeys:write', 'audit:read', 'audit:read:own', 'workspace:read', 'workspace:read:own', 'workspace:write',
    'workspace:write:own', 'tasks:write:own', 'caps:write', 'auth:write', 'auth:write:own',
  ],
  member: ['audit:read:own', 'workspace:read:own', 'workspace:write:own', 'tasks:write:own', 'auth:write:own'],
})

export const isPermissionSet = (v: unknown): v is PermissionSet => PERMISSION_SETS.includes(v as PermissionSet)
export const isRole = (v: unknown): v is Role => ROLES.includes(v as Role)

/**
 * A route's requirement: every entry of `allOf` must be met; an entry is a list of alternatives
 * (e.g. [['workspace:read', 'workspace:read:own'], ['audit:read', 'audit:read:own']]).
 * `null` means "any authenticated caller of the org".
 */
export type Requirement = readonly (readonly Permission[])[] | null

/** Configuration writes (providers, roles, packs) need caps:write (docs/roles.md). */
export const CAPS_WRITE: Requirement = [['caps:write']]
/** Any authenticated caller of the org may read configuration (docs/roles.md). */
export const ANY_MEMBER: Requirement = null

/** The grant that satisfies one alternative list: the unscoped one if held, else the `:own` one. */
export type Grant = { scope: 'all' } | { scope: 'own' }

/**
 * Checks a requirement against the caller's permissions. Returns, per `allOf` entry, whether the
 * caller holds it unscoped ('all') or only as `:own` ('own'), or undefined when any entry fails.
 * The route then applies the `:own` narrowing (creator match, or user_id match for audit).
 */
export function evaluate(held: ReadonlySet<Permission>, requirement: Requirement): Grant[] | undefined {
  if (requirement === null) return []
  const grants: Grant[] = []
  for (const alternatives of requirement) {
    const unscoped = alternatives.find((p) => !p.endsWith(':own') && held.has(p))
    if (unscoped) {
      grants.push({ scope: 'all' })
      continue
    }
    const own = alternatives.find((p) => p.endsWith(':own') && held.has(p))
    if (!own) return undefined
    grants.push({ scope: 'own' })
  }
  return grants
}

export function permissionsOfSet(set: PermissionSet): ReadonlySet<Permission> {
  return new Set(PERMISSION_SET_GRANTS[set])
}

export function permissionsOfRole(role: Role): ReadonlySet<Permission> {
  return new Set(ROLE_GRANTS[role])
}
