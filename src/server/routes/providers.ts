// Model providers (spec "Agent roles and providers"): a provider names where a role's model lives —
// its kind (wire format), the domain its API is on, an https base URL and a default model. The
// routes parse and render; what a change must keep (endpoint, names, the archive cascade) is the
// provider service in ../config/ts.
import type { FastifyInstance } from 'fastify'
import { PROVIDER_KINDS, providerSchema } from '../../contract/index.js'
import type { ProviderPatch } from '../../store/index.js'
import {
  type ProviderCreate,
  archiveProvider,
  configCaller,
  createProvider,
  deleteProvider,
  getProvider,
  listProviders,
  unarchiveProvider,
  updateProvider,
} from '../config/index.js'
import { ANY_MEMBER, CAPS_WRITE } from '../permissions.js'
import { NAME_SCHEMA, idParams, statusOnly } from '../schemas/common.js'
import type { ServerDeps } from '../types.js'

const text = (maxLength: number) => ({ type: 'string', maxLength }) as const
const nullable = (maxLength: number) => ({ type: ['string', 'null'], maxLength }) as const

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

export async function providerRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  providerWriteRoutes(app, deps)
  providerLifecycleRoutes(app, deps)
}

/** Create, read and change providers. */
function providerWriteRoutes(app: FastifyInstance, deps: ServerDeps): void {
  app.post<{ Body: ProviderCreate }>(
    '/providers',
    { config: { permission: CAPS_WRITE }, schema: { body: createBody, response: { 201: providerSchema } } },
    async (request, reply) => {
      const provider = await createProvider(deps, configCaller(request), request.body)
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
      const { include_archived, name } = request.query
      return { providers: await listProviders(deps, request.principal!.org.id, { includeArchived: include_archived === 'true', name }) }
    },
  )

  app.get<{ Params: { id: string } }>(
    '/providers/:id',
    { config: { permission: ANY_MEMBER }, schema: { params: idParams, response: { 200: providerSchema } } },
    async (request) => getProvider(deps, request.principal!.org.id, request.params.id),
  )

  app.patch<{ Params: { id: string }; Body: ProviderPatch }>(
    '/providers/:id',
    { config: { permission: CAPS_WRITE }, schema: { params: idParams, body: patchBody, response: { 200: providerSchema } } },
    async (request) => updateProvider(deps, configCaller(request), request.params.id, request.body),
  )
}

/** Delete, archive (cascading to the roles) and unarchive a provider. */
function providerLifecycleRoutes(app: FastifyInstance, deps: ServerDeps): void {
  app.delete<{ Params: { id: string } }>(
    '/providers/:id',
    { config: { permission: CAPS_WRITE }, schema: { params: idParams, response: { 200: statusOnly('deleted') } } },
    async (request) => {
      await deleteProvider(deps, configCaller(request), request.params.id)
      return { status: 'deleted' }
    },
  )

  app.post<{ Params: { id: string } }>(
    '/providers/:id/archive',
    {
      config: { permission: CAPS_WRITE, openapi: { noBody: true } },
      schema: {
        params: idParams,
        response: { 200: { type: 'object', required: ['status', 'cascaded_roles'], properties: { status: { type: 'string', enum: ['archived'] }, cascaded_roles: { type: 'integer' } } } },
      },
    },
    async (request) => ({ status: 'archived', cascaded_roles: await archiveProvider(deps, configCaller(request), request.params.id) }),
  )

  app.post<{ Params: { id: string } }>(
    '/providers/:id/unarchive',
    { config: { permission: CAPS_WRITE, openapi: { noBody: true } }, schema: { params: idParams, response: { 200: statusOnly('unarchived') } } },
    async (request) => {
      await unarchiveProvider(deps, configCaller(request), request.params.id)
      return { status: 'unarchived' }
    },
  )
}
