// Agent roles (spec "Agent role", "Agent roles and providers", "States and transitions"). A role
// is what a workspace is provisioned from: a provider and model, a capability policy (caps.yaml,
// compiled on every save so a role never holds a policy that does not compile), timeouts, agent
// knobs, a warm-pool policy and attached packs. Decisions the spec leaves open are in docs/roles.md.
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { type EventType, apiError, notFound } from '../../contract/index.js'
import { compilePolicy } from '../../policy/index.js'
import { ENVIRONMENTS, POOL_POLICIES, THINKING_EFFORTS, type AgentRole, type AgentRoleFields, type AgentRolePatch, type StoreTransaction } from '../../store/index.js'
import { checkPackIds } from '../../packs/index.js'
import { emitConfigEvent, restartIdleWorkspaces } from '../config-events.js'
import { ANY_MEMBER, CAPS_WRITE } from '../permissions.js'
import { NAME_SCHEMA, dateTime, idParams, statusOnly } from '../schemas/common.js'
import type { ServerDeps } from '../types.js'
import { duplicateName, fieldError } from '../validation.js'

// Integer columns are 32-bit on Postgres; nobody needs a timeout beyond 68 years.
const count = { type: 'integer', minimum: 0, maximum: 2147483647 } as const
const nullableCount = { type: ['integer', 'null'], minimum: 0, maximum: 2147483647 } as const
const nullableText = (maxLength: number) => ({ type: ['string', 'null'], maxLength }) as const
const MAX_CAPABILITIES_BYTES = 256 * 1024
const LABEL_FIELDS = new Set(['display_name', 'description'])

const roleSchema = {
  type: 'object',
  required: ['id', 'org_id', 'name', 'provider_id', 'environment', 'pool_policy', 'pack_ids', 'created_at', 'updated_at'],
  properties: {
    id: { type: 'string' },
    org_id: { type: 'string' },
    name: { type: 'string' },
    display_name: { type: 'string' },
    description: { type: 'string' },
    provider_id: { type: 'string' },
    model: { type: 'string' },
    capabilities: { type: 'string' },
    environment: { type: 'string' },
    environment_description: { type: 'string' },
    task_timeout_seconds: { type: 'integer' },
    idle_timeout_seconds: { type: 'integer' },
    thinking_effort: { type: 'string' },
    max_continuations: { type: 'integer' },
    max_context_tokens: { type: 'integer' },
    pool_policy: { type: 'string' },
    pool_size: { type: 'integer' },
    pool_max_size: { type: 'integer' },
    pack_ids: { type: 'array', items: { type: 'string' } },
    created_by: { type: 'string' },
    created_at: dateTime,
    updated_at: dateTime,
    archived_at: dateTime,
  },
} as const

/** Every writable field; create requires name and provider_id, PATCH requires at least one field. */
const fieldProperties = {
  name: NAME_SCHEMA,
  display_name: nullableText(200),
  description: nullableText(2000),
  provider_id: { type: 'string', minLength: 1, maxLength: 200 },
  model: { type: ['string', 'null'], minLength: 1, maxLength: 200 },
  capabilities: { type: ['string', 'null'], maxLength: MAX_CAPABILITIES_BYTES },
  environment: { type: 'string', enum: ENVIRONMENTS },
  environment_description: nullableText(4000),
  task_timeout_seconds: nullableCount,
  idle_timeout_seconds: nullableCount,
  thinking_effort: { type: ['string', 'null'], enum: [...THINKING_EFFORTS, null] },
  max_continuations: nullableCount,
  max_context_tokens: nullableCount,
  pool_policy: { type: 'string', enum: POOL_POLICIES },
  pool_size: nullableCount,
  pool_max_size: nullableCount,
  pack_ids: { type: 'array', maxItems: 100, uniqueItems: true, items: { type: 'string', minLength: 1, maxLength: 200 } },
} as const

const listQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    include_archived: { type: 'string', enum: ['true', 'false'] },
    name: NAME_SCHEMA,
    provider_id: { type: 'string', minLength: 1, maxLength: 200 },
  },
} as const

export async function agentRoleRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  roleReadRoutes(app, deps)
  roleChangeRoutes(app, deps)
  roleLifecycleRoutes(app, deps)
}

/** Create and read agent roles. */
function roleReadRoutes(app: FastifyInstance, deps: ServerDeps): void {
  const { store } = deps

  app.post<{ Body: AgentRoleFields }>(
    '/agent-roles',
    {
      config: { permission: CAPS_WRITE },
      schema: { body: { type: 'object', required: ['name', 'provider_id'], additionalProperties: false, properties: fieldProperties }, response: { 201: roleSchema } },
    },
    async (request, reply) => {
      const p = request.principal!
      const body = request.body
      checkPool(body)
      checkCapabilities(body.capabilities)
      const role = await store
        .transaction(async (tx) => {
          await assertProviderUsable(tx, p.org.id, body.provider_id)
          await checkPackIds(tx, p.org.id, body.pack_ids ?? [])
          if (await tx.agentRoles.getByName(p.org.id, body.name)) throw apiError('conflict', `an agent role named ${body.name} already exists`, { fields: { name: 'already exists' } })
          return tx.agentRoles.create(p.org.id, { ...body, created_by: p.userId })
        })
        .catch(duplicateName(body.name, 'agent role'))
      await emitRoleEvent(deps, request, 'agent_role_created', role)
      reply.code(201)
      return role
    },
  )

  app.get<{ Querystring: { include_archived?: 'true' | 'false'; name?: string; provider_id?: string } }>(
    '/agent-roles',
    {
      config: { permission: ANY_MEMBER },
      schema: { querystring: listQuery, response: { 200: { type: 'object', required: ['agent_roles'], properties: { agent_roles: { type: 'array', items: roleSchema } } } } },
    },
    async (request) => {
      const orgId = request.principal!.org.id
      const { include_archived, name, provider_id } = request.query
      const includeArchived = include_archived === 'true'
      if (name !== undefined) {
        const one = await store.agentRoles.getByName(orgId, name)
        const keep = one && (includeArchived || !one.archived_at) && (provider_id === undefined || one.provider_id === provider_id)
        return { agent_roles: keep ? [one] : [] }
      }
      return { agent_roles: await store.agentRoles.list(orgId, { includeArchived, ...(provider_id ? { providerId: provider_id } : {}) }) }
    },
  )

  app.get<{ Params: { id: string } }>(
    '/agent-roles/:id',
    { config: { permission: ANY_MEMBER }, schema: { params: idParams, response: { 200: roleSchema } } },
    async (request) => (await store.agentRoles.get(request.principal!.org.id, request.params.id)) ?? throwNotFound(),
  )
}

/** Change and delete an agent role. */
function roleChangeRoutes(app: FastifyInstance, deps: ServerDeps): void {
  const { store } = deps

  app.patch<{ Params: { id: string }; Body: AgentRolePatch }>(
    '/agent-roles/:id',
    {
      config: { permission: CAPS_WRITE },
      schema: { params: idParams, body: { type: 'object', minProperties: 1, additionalProperties: false, properties: fieldProperties }, response: { 200: roleSchema } },
    },
    async (request) => {
      const orgId = request.principal!.org.id
      const body = request.body
      if (body.capabilities !== undefined) checkCapabilities(body.capabilities)
      const role = await store
        .transaction(async (tx) => {
          const current = (await tx.agentRoles.get(orgId, request.params.id)) ?? throwNotFound()
          if (current.archived_at) throw apiError('role_archived', `agent role ${current.name} is archived; unarchive it first`)
          if (body.provider_id !== undefined && body.provider_id !== current.provider_id) await assertProviderUsable(tx, orgId, body.provider_id)
          checkPool({ ...current, ...body })
          if (body.pack_ids !== undefined) await checkPackIds(tx, orgId, body.pack_ids)
          if (body.name !== undefined && body.name !== current.name && (await tx.agentRoles.getByName(orgId, body.name))) {
            throw apiError('conflict', `an agent role named ${body.name} already exists`, { fields: { name: 'already exists' } })
          }
          return (await tx.agentRoles.update(orgId, current.id, body)) ?? throwNotFound()
        })
        .catch(duplicateName(body.name ?? '', 'agent role'))
      await emitRoleEvent(deps, request, 'agent_role_updated', role, { patched_fields: Object.keys(body).sort() })
      // Labels do not reach the agent; anything else does, so idle workspaces respawn to pick it up.
      if (Object.keys(body).some((k) => !LABEL_FIELDS.has(k))) await restartIdleWorkspaces(deps, request, orgId, [role.id])
      return role
    },
  )

  app.delete<{ Params: { id: string } }>(
    '/agent-roles/:id',
    { config: { permission: CAPS_WRITE }, schema: { params: idParams, response: { 200: statusOnly('deleted') } } },
    async (request) => {
      const orgId = request.principal!.org.id
      const current = (await store.agentRoles.get(orgId, request.params.id)) ?? throwNotFound()
      // Workspaces keep their role for their whole life (snapshots, forks, audit names): any row pins it.
      const workspaces = await store.agentRoles.workspaceCount(orgId, current.id)
      if (workspaces > 0) {
        throw apiError('role_in_use', `agent role ${current.name} is used by ${workspaces} workspace(s); archive it instead`, { workspaces })
      }
      const deleted = (await store.agentRoles.delete(orgId, current.id)) ?? throwNotFound()
      await emitRoleEvent(deps, request, 'agent_role_deleted', deleted)
      return { status: 'deleted' }
    },
  )
}

/** Archive, unarchive and stop the workspaces of an agent role. */
function roleLifecycleRoutes(app: FastifyInstance, deps: ServerDeps): void {
  const { store } = deps

  app.post<{ Params: { id: string } }>(
    '/agent-roles/:id/archive',
    { config: { permission: CAPS_WRITE }, schema: { params: idParams, response: { 200: statusOnly('archived') } } },
    async (request) => {
      const orgId = request.principal!.org.id
      const current = (await store.agentRoles.get(orgId, request.params.id)) ?? throwNotFound()
      // Already archived: nothing changes, so no second event (docs/roles.md).
      if (current.archived_at) return { status: 'archived' }
      await store.agentRoles.setArchived(orgId, current.id, true)
      await emitRoleEvent(deps, request, 'agent_role_archived', current)
      return { status: 'archived' }
    },
  )

  app.post<{ Params: { id: string } }>(
    '/agent-roles/:id/unarchive',
    { config: { permission: CAPS_WRITE }, schema: { params: idParams, response: { 200: statusOnly('unarchived') } } },
    async (request) => {
      const orgId = request.principal!.org.id
      const current = await store.transaction(async (tx) => {
        const role = (await tx.agentRoles.get(orgId, request.params.id)) ?? throwNotFound()
        if (!role.archived_at) throw apiError('not_archived', `agent role ${role.name} is not archived`)
        // A role whose provider is archived could not run a task anyway; unarchive the provider first.
        const provider = await tx.providers.getForUse(orgId, role.provider_id)
        if (provider?.archived_at) throw apiError('provider_archived', `provider ${provider.name} is archived; unarchive it first`)
        await tx.agentRoles.setArchived(orgId, role.id, false)
        return role
      })
      await emitRoleEvent(deps, request, 'agent_role_unarchived', current)
      return { status: 'unarchived' }
    },
  )

  app.post<{ Params: { id: string } }>(
    '/agent-roles/:id/stop-workspaces',
    {
      // Unscoped on purpose (spec): stopping every workspace of a role is an operator act.
      config: { permission: [['workspace:write']] },
      schema: { params: idParams, response: { 200: { type: 'object', required: ['stopping'], properties: { stopping: { type: 'integer' } } } } },
    },
    async (request) => {
      const orgId = request.principal!.org.id
      const role = (await store.agentRoles.get(orgId, request.params.id)) ?? throwNotFound()
      const stopping = deps.workspaceControl ? await deps.workspaceControl.stopForRole(orgId, role.id) : 0
      return { stopping }
    },
  )
}

function throwNotFound(): never {
  throw notFound('agent role')
}

/** The provider exists in the caller's org (else a field error) and is not archived; locked until the transaction ends. */
async function assertProviderUsable(tx: StoreTransaction, orgId: string, providerId: string): Promise<void> {
  const provider = await tx.providers.getForUse(orgId, providerId)
  if (!provider) throw fieldError('provider_id', 'no such provider in this organisation')
  if (provider.archived_at) throw apiError('provider_archived', `provider ${provider.name} is archived`)
}

/** Pool settings agree: dynamic pools need a ceiling, and the floor never exceeds it. */
function checkPool(r: { pool_policy?: string; pool_size?: number | null; pool_max_size?: number | null }): void {
  if (r.pool_policy === 'dynamic' && (r.pool_max_size ?? 0) < 1) throw fieldError('pool_max_size', 'must be at least 1 when pool_policy is dynamic')
  if (r.pool_size != null && r.pool_max_size != null && r.pool_size > r.pool_max_size) throw fieldError('pool_size', `must not exceed pool_max_size (${r.pool_max_size})`)
}

/** Compiles on save (spec): a failing policy is refused with the compiler's diagnostics. */
function checkCapabilities(source: string | null | undefined): void {
  if (source === null || source === undefined) return
  const result = compilePolicy(source)
  if (!result.ok) {
    const errors = result.diagnostics.filter((d) => d.severity === 'error')
    throw apiError('invalid_capabilities', `capabilities do not compile: ${errors.length} error(s), first: ${errors[0]?.message ?? 'unknown'}`, {
      diagnostics: result.diagnostics,
    })
  }
}

function emitRoleEvent(deps: ServerDeps, request: FastifyRequest, type: EventType, role: AgentRole, extra: Record<string, unknown> = {}): Promise<void> {
  const detail: Record<string, unknown> = { resource_id: role.id, name: role.name }
  if (type === 'agent_role_created' || type === 'agent_role_updated') {
    Object.assign(detail, { display_name: role.display_name ?? '', provider_id: role.provider_id, model: role.model ?? '' })
  }
  return emitConfigEvent(deps, request, type, { ...detail, ...extra })
}
