// Agent roles (spec "Agent role", "Agent roles and providers"): a role is what a workspace is
// provisioned from — a provider and model, a capability policy, timeouts, agent knobs, a warm-pool
// policy and attached packs. The routes parse and render; what a save must keep is the role
// service in ../config/agent-roles.ts.
import type { FastifyInstance } from 'fastify'
import { AGENT_KINDS, ENVIRONMENTS, POOL_POLICIES, THINKING_EFFORTS, agentRoleSchema as roleSchema, roleResourcesSchema as resourcesSchema } from '../../contract/index.js'
import type { AgentRoleFields, AgentRolePatch } from '../../store/index.js'
import {
  archiveAgentRole,
  configCaller,
  createAgentRole,
  deleteAgentRole,
  getAgentRole,
  listAgentRoles,
  missingMaterial,
  stopRoleWorkspaces,
  unarchiveAgentRole,
  updateAgentRole,
} from '../config/index.js'
import { ANY_MEMBER, CAPS_WRITE } from '../permissions.js'
import { NAME_SCHEMA, idParams, statusOnly } from '../schemas/common.js'
import type { ServerDeps } from '../types.js'

// Integer columns are 32-bit on Postgres; nobody needs a timeout beyond 68 years.
const nullableCount = { type: ['integer', 'null'], minimum: 0, maximum: 2147483647 } as const
const nullableText = (maxLength: number) => ({ type: ['string', 'null'], maxLength }) as const
const MAX_CAPABILITIES_BYTES = 256 * 1024

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
  resources: { ...resourcesSchema, type: ['object', 'null'] },
  agent_kind: { type: ['string', 'null'], enum: [...AGENT_KINDS, null] },
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
  roleCheckRoute(app, deps)
}

/**
 * What saving a role with these capabilities would warn about, without saving anything: the
 * credential and secret names its transforms use that this org lacks (`corral caps lint
 * --api-url`; docs/roles.md). caps:write, like a save: only names go out, never values.
 */
function roleCheckRoute(app: FastifyInstance, deps: ServerDeps): void {
  app.post<{ Body: { capabilities: string } }>(
    '/agent-roles/check',
    {
      config: { permission: CAPS_WRITE },
      schema: {
        body: { type: 'object', required: ['capabilities'], additionalProperties: false, properties: { capabilities: { type: 'string', maxLength: MAX_CAPABILITIES_BYTES } } },
        response: { 200: { type: 'object', required: ['warnings'], properties: { warnings: roleSchema.properties.warnings } } },
      },
    },
    async (request) => ({ warnings: await missingMaterial(deps.store, request.principal!.org.id, request.body.capabilities) }),
  )
}

/** Create and read agent roles. */
function roleReadRoutes(app: FastifyInstance, deps: ServerDeps): void {
  app.post<{ Body: AgentRoleFields }>(
    '/agent-roles',
    {
      config: { permission: CAPS_WRITE },
      schema: { body: { type: 'object', required: ['name', 'provider_id'], additionalProperties: false, properties: fieldProperties }, response: { 201: roleSchema } },
    },
    async (request, reply) => {
      const role = await createAgentRole(deps, configCaller(request), request.body)
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
      const { include_archived, name, provider_id } = request.query
      return { agent_roles: await listAgentRoles(deps, request.principal!.org.id, { includeArchived: include_archived === 'true', name, providerId: provider_id }) }
    },
  )

  app.get<{ Params: { id: string } }>(
    '/agent-roles/:id',
    { config: { permission: ANY_MEMBER }, schema: { params: idParams, response: { 200: roleSchema } } },
    async (request) => getAgentRole(deps, request.principal!.org.id, request.params.id),
  )
}

/** Change and delete an agent role. */
function roleChangeRoutes(app: FastifyInstance, deps: ServerDeps): void {
  app.patch<{ Params: { id: string }; Body: AgentRolePatch }>(
    '/agent-roles/:id',
    {
      config: { permission: CAPS_WRITE },
      schema: { params: idParams, body: { type: 'object', minProperties: 1, additionalProperties: false, properties: fieldProperties }, response: { 200: roleSchema } },
    },
    async (request) => updateAgentRole(deps, configCaller(request), request.params.id, request.body),
  )

  app.delete<{ Params: { id: string } }>(
    '/agent-roles/:id',
    { config: { permission: CAPS_WRITE }, schema: { params: idParams, response: { 200: statusOnly('deleted') } } },
    async (request) => {
      await deleteAgentRole(deps, configCaller(request), request.params.id)
      return { status: 'deleted' }
    },
  )
}

/** Archive, unarchive and stop the workspaces of an agent role. */
function roleLifecycleRoutes(app: FastifyInstance, deps: ServerDeps): void {
  app.post<{ Params: { id: string } }>(
    '/agent-roles/:id/archive',
    { config: { permission: CAPS_WRITE, openapi: { noBody: true } }, schema: { params: idParams, response: { 200: statusOnly('archived') } } },
    async (request) => {
      await archiveAgentRole(deps, configCaller(request), request.params.id)
      return { status: 'archived' }
    },
  )

  app.post<{ Params: { id: string } }>(
    '/agent-roles/:id/unarchive',
    { config: { permission: CAPS_WRITE, openapi: { noBody: true } }, schema: { params: idParams, response: { 200: statusOnly('unarchived') } } },
    async (request) => {
      await unarchiveAgentRole(deps, configCaller(request), request.params.id)
      return { status: 'unarchived' }
    },
  )

  app.post<{ Params: { id: string } }>(
    '/agent-roles/:id/stop-workspaces',
    {
      // Unscoped on purpose (spec): stopping every workspace of a role is an operator act.
      config: { permission: [['workspace:write']], openapi: { noBody: true } },
      schema: { params: idParams, response: { 200: { type: 'object', required: ['stopping'], properties: { stopping: { type: 'integer' } } } } },
    },
    async (request) => ({ stopping: await stopRoleWorkspaces(deps, request.principal!.org.id, request.params.id) }),
  )
}
