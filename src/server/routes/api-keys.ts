// API keys (spec "API keys"): create returns the secret once; only its hash is stored; revoke
// deletes the row, evicts the verification cache here and on every replica, and is reachable in
// every billing posture.
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { displayPrefix, hashApiKeySecret } from '../auth/api-key-secret.js'
import { KEY_REVOKED_CHANNEL } from '../auth/key-cache.js'
import { auditedMutation } from '../../audit/index.js'
import { apiError, apiKeySchema, createdApiKeySchema, notFound, type NewAuditEvent } from '../../contract/index.js'
import { PERMISSION_SETS, type PermissionSet } from '../permissions.js'
import { idParams, statusOnly } from '../schemas/common.js'
import type { ApiKey } from '../../store/index.js'
import type { Principal, ServerDeps } from '../types.js'

const createBody = {
  type: 'object',
  required: ['label', 'permission_set'],
  additionalProperties: false,
  properties: {
    label: { type: 'string', minLength: 1, maxLength: 100 },
    permission_set: { type: 'string', enum: PERMISSION_SETS },
  },
} as const

const KEYS_WRITE = [['apikeys:write']] as const

/** Exactly the spec's public fields (the response schema enforces it too). */
function publicKey(k: ApiKey) {
  return {
    id: k.id,
    label: k.label,
    prefix: k.prefix,
    permission_set: k.permission_set,
    created_at: k.created_at,
    ...(k.created_by_user_id ? { created_by_user_id: k.created_by_user_id } : {}),
    ...(k.last_used_at ? { last_used_at: k.last_used_at } : {}),
  }
}

/** full_access keys can do more than any default role, so only owners (or full_access keys) mint them. */
function assertMayIssue(principal: Principal, set: PermissionSet): void {
  if (set !== 'full_access') return
  const isOwner = principal.kind === 'session' ? principal.role === 'owner' : principal.permissionSet === 'full_access'
  if (!isOwner) throw apiError('permission_denied', 'only owners can create full_access keys', { fields: { permission_set: 'requires the owner role' } })
}

export async function apiKeyRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  app.post<{ Body: { label: string; permission_set: PermissionSet } }>(
    '/api-keys',
    { config: { permission: KEYS_WRITE }, schema: { body: createBody, response: { 201: createdApiKeySchema } } },
    async (request, reply) => {
      const principal = request.principal!
      assertMayIssue(principal, request.body.permission_set)
      const { value } = await deps.identity.keys.mint(principal.org.id, request.body)
      const key = await auditedMutation(deps.store, deps.audit, async (tx, record) => {
        const key = await tx.apiKeys.create(principal.org.id, {
          label: request.body.label,
          permission_set: request.body.permission_set,
          ...(principal.kind === 'session' ? { created_by_user_id: principal.userId } : {}),
          secret_hash: hashApiKeySecret(value),
          prefix: displayPrefix(value),
        })
        record(keyEvent(request, 'api_key_created', key))
        return key
      })
      reply.code(201)
      return { ...publicKey(key), value }
    },
  )

  app.get(
    '/api-keys',
    {
      config: { permission: KEYS_WRITE },
      schema: { response: { 200: { type: 'object', required: ['api_keys'], properties: { api_keys: { type: 'array', items: apiKeySchema } } } } },
    },
    async (request) => ({ api_keys: (await deps.store.apiKeys.list(request.principal!.org.id)).map(publicKey) }),
  )

  app.delete<{ Params: { id: string } }>(
    '/api-keys/:id',
    { config: { permission: KEYS_WRITE, postureExempt: true }, schema: { params: idParams, response: { 200: statusOnly('revoked') } } },
    async (request) => {
      const orgId = request.principal!.org.id
      if (!(await deps.store.apiKeys.get(orgId, request.params.id))) throw notFound('api key')
      // Spec order: the provider's delete (not-found there is success), the local mirror, the cache.
      await deps.identity.keys.revoke(orgId, request.params.id)
      const key = await auditedMutation(deps.store, deps.audit, async (tx, record) => {
        const key = await tx.apiKeys.delete(orgId, request.params.id)
        if (key) record(keyEvent(request, 'api_key_revoked', key))
        return key
      })
      if (!key) throw notFound('api key') // revoked concurrently by another request
      // Evict before answering, then tell the other replicas and answer once this replica has heard
      // its own notification (delivered to every listener together): the next request is a 401.
      app.keyCache.evict(key.id)
      const echoed = app.keyCache.echo(key.id, REVOKE_ECHO_WAIT_MS)
      await deps.store.notify(KEY_REVOKED_CHANNEL, key.id)
      await echoed
      return { status: 'revoked' }
    },
  )
}

/** How long a revoke waits for its own notification before answering anyway. */
const REVOKE_ECHO_WAIT_MS = 2_000

function keyEvent(request: FastifyRequest, type: 'api_key_created' | 'api_key_revoked', key: ApiKey): NewAuditEvent {
  const principal = request.principal!
  return {
    org_id: principal.org.id,
    user_id: principal.userId,
    event_type: type,
    detail: { resource_id: key.id, label: key.label, prefix: key.prefix, permission_set: key.permission_set },
  }
}
