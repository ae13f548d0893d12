// Turns a bearer token into a Principal: an API-key secret (by hash, through the verification
// cache) or a session JWT (through the identity provider named by its issuer), mapped onto the
// org and, for sessions, the caller's active membership. Every failure is the same 401: the
// response never tells a prober whether a key existed, expired or was revoked.
import { auditedMutation } from '../../audit/index.js'
import { SYSTEM_USER, apiError } from '../../contract/index.js'
import { isPermissionSet, isRole, permissionsOfRole, permissionsOfSet } from '../permissions.js'
import type { Principal, ServerDeps } from '../types.js'
import { hashApiKeySecret, looksLikeApiKey } from './api-key-secret.js'
import type { ApiKeyCache, CachedKey } from './key-cache.js'

export interface AuthState {
  cache: ApiKeyCache
  /** key id → last time we wrote last_used_at (throttles the write). */
  lastTouched: Map<string, number>
}

const unauthenticated = (message = 'missing or invalid credential') => apiError('unauthenticated', message)

export async function authenticate(deps: ServerDeps, state: AuthState, token: string): Promise<Principal> {
  return looksLikeApiKey(token) ? authenticateKey(deps, state, token) : authenticateSession(deps, token)
}

async function authenticateKey(deps: ServerDeps, state: AuthState, secret: string): Promise<Principal> {
  const hash = hashApiKeySecret(secret)
  let key: CachedKey | undefined = state.cache.get(hash)
  let org
  if (key) {
    org = await deps.store.orgs.get(key.org_id)
  } else {
    const found = await deps.store.apiKeys.findByHash(hash)
    if (found) {
      key = pick(found.key)
      org = found.org
      state.cache.set(hash, key)
    }
  }
  if (!key || !org || !isPermissionSet(key.permission_set)) throw unauthenticated()
  touchLastUsed(deps, state, key.id)
  return {
    kind: 'api_key',
    org,
    userId: SYSTEM_USER,
    creatorId: key.id,
    permissions: permissionsOfSet(key.permission_set),
    permissionSet: key.permission_set,
    keyId: key.id,
  }
}

function pick(k: CachedKey): CachedKey {
  return { id: k.id, org_id: k.org_id, label: k.label, prefix: k.prefix, permission_set: k.permission_set, created_by_user_id: k.created_by_user_id ?? null }
}

/** `last_used_at` is kept to the minute, not per request: one write per key per interval per process. */
function touchLastUsed(deps: ServerDeps, state: AuthState, keyId: string): void {
  const now = Date.now()
  const every = deps.config.lastUsedThrottleMs ?? 60_000
  const last = state.lastTouched.get(keyId)
  if (last !== undefined && now - last < every) return
  state.lastTouched.set(keyId, now)
  if (state.lastTouched.size > 100_000) state.lastTouched.clear()
  deps.store.apiKeys.touchLastUsed(keyId, new Date(now).toISOString()).catch((err: unknown) => {
    deps.logger.warn({ err, key_id: keyId }, 'could not record api key last_used_at')
  })
}

async function authenticateSession(deps: ServerDeps, token: string): Promise<Principal> {
  const identity = await deps.identity.verify(token)
  if (!identity) throw unauthenticated()
  const org = (await deps.store.orgs.get(identity.org)) ?? (identity.provider === 'builtin' ? undefined : await deps.store.orgs.getByName(identity.org))
  if (!org) throw unauthenticated()
  const user = identity.userId ? await deps.store.users.get(identity.userId) : identity.email ? await deps.store.users.getByEmail(identity.email) : undefined
  if (!user) throw unauthenticated()
  const membership = await deps.store.memberships.get(org.id, user.id)
  if (!membership || membership.status !== 'active' || !isRole(membership.role)) throw unauthenticated('no active membership in this org')
  if (!membership.first_seen_at) await recordFirstSeen(deps, org.id, user.id, membership.email, membership.role)
  return {
    kind: 'session',
    org,
    userId: user.id,
    creatorId: user.id,
    permissions: permissionsOfRole(membership.role),
    role: membership.role,
    email: membership.email,
  }
}

/** `membership_first_seen` fires once, on the first /v1 request after acceptance (atomic in the store). */
async function recordFirstSeen(deps: ServerDeps, orgId: string, userId: string, email: string, role: string): Promise<void> {
  await auditedMutation(deps.store, deps.audit, async (tx, record) => {
    if (!(await tx.memberships.markFirstSeen(orgId, userId))) return
    record({ org_id: orgId, user_id: userId, event_type: 'membership_first_seen', detail: { resource_id: userId, email, role, source: 'self_heal' } })
  })
}
