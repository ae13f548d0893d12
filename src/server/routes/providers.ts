// Model providers (spec "Agent roles and providers", "States and transitions"). A provider names
// where a role's model lives: its kind (wire format), the domain its API is on, an https base URL
// and a default model. Archive cascades to every role that references it and is refused while any
// of those roles' workspaces still run; delete is refused while any role references it
// (`provider_in_use`). Decisions the spec leaves open are in docs/roles.md.
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { type EventType, apiError, notFound } from '../../contract/index.js'
import { PROVIDER_KINDS, type Provider, type ProviderKind, type ProviderPatch } from '../../store/index.js'
import { emitConfigEvent, restartIdleWorkspaces } from '../config-events.js'
import { ANY_MEMBER, CAPS_WRITE } from '../permissions.js'
import { NAME_SCHEMA, dateTime, idParams, statusOnly } from '../schemas/common.js'
import type { ServerDeps } from '../types.js'
import { duplicateName, fieldError } from '../validation.js'
const LABEL_FIELDS = new Set(['display_name', 'description', 'name'])
const HOSTNAME_RE = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/

const text = (maxLength: number) => ({ type: 'string', maxLength }) as const
const nullable = (maxLength: number) => ({ type: ['string', 'null'], maxLength }) as const

const providerSchema = {
  type: 'object',
  required: ['id', 'org_id', 'name', 'created_at', 'updated_at'],
  properties: {
    id: { type: 'string' },
    org_id: { type: 'string' },
    name: { type: 'string' },
    display_name: { type: 'string' },
    description: { type: 'string' },
    kind: { type: 'string' },
    domain: { type: 'string' },
    base_url: { type: 'string' },
    default_model: { type: 'string' },
    created_by: { type: 'string' },
    created_at: dateTime,
    updated_at: dateTime,
    archived_at: dateTime,
  },
} as const

const createBody = {
  type: 'object',
  required: ['name', 'kind'],
  additionalProperties: false,
  properties: {
    name: NAME_SCHEMA,
    display_name: text(200),
    description: text(2000),
    kind: { type: 'string', enum: PROVIDER_KINDS },
    domain: { type: 'string', minLength: 1, maxLength: 253 },
    base_url: { type: 'string', minLength: 1, maxLength: 2048 },
    default_model: { type: 'string', minLength: 1, maxLength: 200 },
  },
} as const

const patchBody = {
  type: 'object',
  minProperties: 1,
  additionalProperties: false,
  properties: {
    name: NAME_SCHEMA,
    display_name: nullable(200),
    description: nullable(2000),
    kind: { type: 'string', enum: PROVIDER_KINDS },
    domain: { type: 'string', minLength: 1, maxLength: 253 },
    base_url: { type: ['string', 'null'], minLength: 1, maxLength: 2048 },
    default_model: { type: ['string', 'null'], minLength: 1, maxLength: 200 },
  },
} as const

const listQuery = {
  type: 'object',
  additionalProperties: false,
  properties: { include_archived: { type: 'string', enum: ['true', 'false'] }, name: NAME_SCHEMA },
} as const

interface CreateBody {
  name: string
  display_name?: string
  description?: string
  kind: ProviderKind
  domain?: string
  base_url?: string
  default_model?: string
}

export async function providerRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  providerWriteRoutes(app, deps)
  providerLifecycleRoutes(app, deps)
}

/** Create, read and change providers. */
function providerWriteRoutes(app: FastifyInstance, deps: ServerDeps): void {
  const { store } = deps

  app.post<{ Body: CreateBody }>(
    '/providers',
    { config: { permission: CAPS_WRITE }, schema: { body: createBody, response: { 201: providerSchema } } },
    async (request, reply) => {
      const p = request.principal!
      const { domain, base_url } = resolveEndpoint(request.body.domain, request.body.base_url ?? null, false)
      await assertNameFree(deps, p.org.id, request.body.name)
      const provider = await store.providers
        .create(p.org.id, { ...request.body, domain, base_url, created_by: p.userId })
        .catch(duplicateName(request.body.name))
      await emitProviderEvent(deps, request, 'provider_created', provider)
      reply.code(201)
      return provider
    },
  )

  app.get<{ Querystring: { include_archived?: 'true' | 'false'; name?: string } }>(
    '/providers',
    {
      config: { permission: ANY_MEMBER },
      schema: { querystring: listQuery, response: { 200: { type: 'object', required: ['providers'], properties: { providers: { type: 'array', items: providerSchema } } } } },
    },
    async (request) => {
      const orgId = request.principal!.org.id
      const { include_archived, name } = request.query
      if (name !== undefined) {
        const one = await store.providers.getByName(orgId, name)
        return { providers: one && (include_archived === 'true' || !one.archived_at) ? [one] : [] }
      }
      return { providers: await store.providers.list(orgId, { includeArchived: include_archived === 'true' }) }
    },
  )

  app.get<{ Params: { id: string } }>(
    '/providers/:id',
    { config: { permission: ANY_MEMBER }, schema: { params: idParams, response: { 200: providerSchema } } },
    async (request) => (await store.providers.get(request.principal!.org.id, request.params.id)) ?? throwNotFound(),
  )

  app.patch<{ Params: { id: string }; Body: ProviderPatch }>(
    '/providers/:id',
    { config: { permission: CAPS_WRITE }, schema: { params: idParams, body: patchBody, response: { 200: providerSchema } } },
    async (request) => {
      const orgId = request.principal!.org.id
      const current = (await store.providers.get(orgId, request.params.id)) ?? throwNotFound()
      if (current.archived_at) throw apiError('provider_archived', `provider ${current.name} is archived; unarchive it first`)
      const body = request.body
      const patch: ProviderPatch = { ...body }
      if (body.domain !== undefined || body.base_url !== undefined) {
        // A new base URL alone moves the domain with it; an explicit domain must agree with the URL.
        const baseUrl = body.base_url === undefined ? (current.base_url ?? null) : body.base_url
        const domain = body.domain ?? (body.base_url ? undefined : current.domain)
        const resolved = resolveEndpoint(domain, baseUrl, true)
        patch.domain = resolved.domain
        if (body.base_url !== undefined) patch.base_url = resolved.base_url
      }
      if (body.name !== undefined && body.name !== current.name) await assertNameFree(deps, orgId, body.name)
      const provider = (await store.providers.update(orgId, current.id, patch).catch(duplicateName(body.name ?? ''))) ?? throwNotFound()
      await emitProviderEvent(deps, request, 'provider_updated', provider, { patched_fields: Object.keys(body).sort() })
      // Roles read the provider's endpoint and default model at provisioning: respawn idle workspaces
      // (labels do not reach the agent).
      if (Object.keys(body).some((k) => !LABEL_FIELDS.has(k))) {
        await restartIdleWorkspaces(deps, request, orgId, (await store.agentRoles.list(orgId, { providerId: provider.id })).map((r) => r.id))
      }
      return provider
    },
  )
}

/** Delete, archive (cascading to the roles) and unarchive a provider. */
function providerLifecycleRoutes(app: FastifyInstance, deps: ServerDeps): void {
  const { store } = deps

  app.delete<{ Params: { id: string } }>(
    '/providers/:id',
    { config: { permission: CAPS_WRITE }, schema: { params: idParams, response: { 200: statusOnly('deleted') } } },
    async (request) => {
      const orgId = request.principal!.org.id
      const current = (await store.providers.get(orgId, request.params.id)) ?? throwNotFound()
      const roleIds = await store.agentRoles.idsByProvider(orgId, current.id)
      if (roleIds.length > 0) {
        throw apiError('provider_in_use', `provider ${current.name} is referenced by ${roleIds.length} agent role(s); delete them or archive the provider`, { roles: roleIds.length })
      }
      const deleted = (await store.providers.delete(orgId, current.id)) ?? throwNotFound()
      await emitProviderEvent(deps, request, 'provider_deleted', deleted)
      return { status: 'deleted' }
    },
  )

  app.post<{ Params: { id: string } }>(
    '/providers/:id/archive',
    {
      config: { permission: CAPS_WRITE },
      schema: {
        params: idParams,
        response: { 200: { type: 'object', required: ['status', 'cascaded_roles'], properties: { status: { type: 'string', enum: ['archived'] }, cascaded_roles: { type: 'integer' } } } },
      },
    },
    async (request) => {
      const orgId = request.principal!.org.id
      const current = (await store.providers.get(orgId, request.params.id)) ?? throwNotFound()
      // Already archived: nothing changes, so no event (docs/roles.md).
      if (current.archived_at) return { status: 'archived', cascaded_roles: 0 }
      // Archived roles count too: their workspaces may still run.
      const roleIds = await store.agentRoles.idsByProvider(orgId, current.id)
      const active = roleIds.length > 0 && deps.workspaceControl ? await deps.workspaceControl.activeCount(orgId, roleIds) : 0
      if (active > 0) {
        throw apiError('workspaces_active', `${active} workspace(s) using a role of provider ${current.name} still run; stop them first (corral role stop-workspaces)`, { active_workspaces: active })
      }
      // The row lock orders this against role creates and unarchives on the same provider.
      const cascaded = await store.transaction(async (tx) => {
        const locked = await tx.providers.getForUse(orgId, current.id)
        if (!locked || locked.archived_at) return undefined // a concurrent archive won
        await tx.providers.setArchived(orgId, current.id, true)
        return tx.agentRoles.archiveByProvider(orgId, current.id)
      })
      if (cascaded === undefined) return { status: 'archived', cascaded_roles: 0 }
      await emitProviderEvent(deps, request, 'provider_archived', current, { cascaded_roles: cascaded })
      return { status: 'archived', cascaded_roles: cascaded }
    },
  )

  app.post<{ Params: { id: string } }>(
    '/providers/:id/unarchive',
    { config: { permission: CAPS_WRITE }, schema: { params: idParams, response: { 200: statusOnly('unarchived') } } },
    async (request) => {
      const orgId = request.principal!.org.id
      const current = (await store.providers.get(orgId, request.params.id)) ?? throwNotFound()
      if (!current.archived_at) throw apiError('not_archived', `provider ${current.name} is not archived`)
      // Only the provider: roles archived by the cascade stay archived (spec).
      await store.providers.setArchived(orgId, current.id, false)
      await emitProviderEvent(deps, request, 'provider_unarchived', current)
      return { status: 'unarchived' }
    },
  )
}

function throwNotFound(what = 'provider'): never {
  throw notFound(what)
}

/**
 * domain and base_url agree: the domain is derived from the URL when omitted; the URL is https
 * (the proxy reaches providers over TLS only); a domain alone is a bare hostname.
 */
function resolveEndpoint(domain: string | undefined, baseUrl: string | null, patching: boolean): { domain: string; base_url: string | null } {
  let urlHost: string | undefined
  if (baseUrl !== null) {
    let url: URL
    try {
      url = new URL(baseUrl)
    } catch {
      throw fieldError('base_url', 'must be an absolute https URL')
    }
    if (url.protocol !== 'https:') throw fieldError('base_url', 'must use https')
    if (url.username || url.password) throw fieldError('base_url', 'must not carry credentials (use a credential and an auth transform)')
    if (url.search || url.hash) throw fieldError('base_url', 'must not have a query or fragment')
    urlHost = url.hostname.replace(/^\[|\]$/g, '')
    baseUrl = url.href.replace(/\/$/, '')
  }
  const host = (domain ?? urlHost)?.toLowerCase()
  if (host === undefined) throw fieldError(patching ? 'base_url' : 'domain', 'domain is required when base_url is absent')
  if (!HOSTNAME_RE.test(host)) throw fieldError('domain', 'must be a hostname (no scheme, port or path)')
  if (urlHost !== undefined && urlHost.toLowerCase() !== host) throw fieldError('base_url', `host ${urlHost} differs from domain ${host}`)
  return { domain: host, base_url: baseUrl }
}

async function assertNameFree(deps: ServerDeps, orgId: string, name: string): Promise<void> {
  if (await deps.store.providers.getByName(orgId, name)) throw apiError('conflict', `a provider named ${name} already exists`, { fields: { name: 'already exists' } })
}

function emitProviderEvent(deps: ServerDeps, request: FastifyRequest, type: EventType, provider: Provider, extra: Record<string, unknown> = {}): Promise<void> {
  const detail: Record<string, unknown> = { resource_id: provider.id, name: provider.name }
  if (type === 'provider_created' || type === 'provider_updated') {
    Object.assign(detail, { display_name: provider.display_name ?? '', kind: provider.kind ?? '', domain: provider.domain ?? '' })
  }
  return emitConfigEvent(deps, request, type, { ...detail, ...extra })
}
