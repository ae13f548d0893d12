// Credentials (spec "Credentials"): static-token, basic-auth and query-key kinds, and kind oauth
// (created through src/secrets/oauth/; consent in ./oauth.ts), sealed at rest and injected by the proxy's auth transforms at the provider's documented
// placement. Responses carry metadata only; the material has no read-back path. Org credentials
// need `auth:write`; a member's personal credentials (`personal: true`, owner_user_id) are theirs
// to manage with `auth:write:own` (credential-access.ts; docs/credentials.md "Personal credentials").
import type { FastifyInstance } from 'fastify'
import { AUTH_PROVIDERS } from '../../policy/index.js'
import { CREDENTIAL_KINDS, OAUTH_KIND } from '../../secrets/index.js'
import { apiError, notFound } from '../../contract/index.js'
import { ownOnly, reachableCredential } from '../credential-access.js'
import { dateTime, idParams, statusOnly } from '../schemas/common.js'
import type { ServerDeps } from '../types.js'
import { asValidation, materialAdmin } from '../org-material.js'
import { oauthConsent } from '../oauth-consent.js'

const AUTH_WRITE = [['auth:write', 'auth:write:own']] as const
const PROVIDERS = Object.keys(AUTH_PROVIDERS)

const credentialSchema = {
  type: 'object',
  required: ['id', 'name', 'provider', 'kind', 'status', 'created_at', 'updated_at'],
  properties: {
    id: { type: 'string' }, name: { type: 'string' }, provider: { type: 'string' }, kind: { type: 'string' }, status: { type: 'string' },
    created_by_user_id: { type: 'string' }, owner_user_id: { type: 'string' }, created_at: dateTime, updated_at: dateTime,
    scopes: { type: 'array', items: { type: 'string' } },
  },
} as const

interface CreateBody {
  name: string; provider: string; kind: string; token?: string; username?: string; password?: string; personal?: boolean
  // kind oauth (docs/credentials.md "OAuth credentials")
  client_id?: string; client_secret?: string; issuer?: string; authorization_url?: string; token_url?: string; scopes?: string[]
}

export async function credentialRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  app.post<{ Body: CreateBody }>(
    '/credentials',
    {
      config: { permission: AUTH_WRITE },
      schema: {
        body: {
          type: 'object', required: ['name', 'provider', 'kind'], additionalProperties: false,
          properties: {
            name: { type: 'string', minLength: 1, maxLength: 64 },
            provider: { type: 'string', enum: PROVIDERS },
            kind: { type: 'string', enum: [...CREDENTIAL_KINDS, OAUTH_KIND] },
            token: { type: 'string', minLength: 1, maxLength: 16384 },
            username: { type: 'string', maxLength: 1024 },
            password: { type: 'string', minLength: 1, maxLength: 16384 },
            personal: { type: 'boolean' },
            client_id: { type: 'string', minLength: 1, maxLength: 1024 },
            client_secret: { type: 'string', minLength: 1, maxLength: 16384 },
            issuer: { type: 'string', minLength: 1, maxLength: 2048 },
            authorization_url: { type: 'string', minLength: 1, maxLength: 2048 },
            token_url: { type: 'string', minLength: 1, maxLength: 2048 },
            scopes: { type: 'array', maxItems: 50, items: { type: 'string', minLength: 1, maxLength: 200 } },
          },
        },
        response: { 201: credentialSchema },
      },
    },
    async (request, reply) => {
      const p = request.principal!
      const admin = materialAdmin(deps)
      if (request.body.personal && p.kind !== 'session') {
        throw apiError('validation_error', 'personal: only a signed-in user holds personal credentials; an API key has none', { fields: { personal: 'needs a user session' } })
      }
      if (!request.body.personal && ownOnly(request)) {
        throw apiError('permission_denied', 'auth:write:own only creates personal credentials (personal: true); org credentials need auth:write')
      }
      const actor = { orgId: p.org.id, userId: p.userId }
      const meta = request.body.kind === OAUTH_KIND
        ? await oauthConsent(deps).create(actor, request.body).catch(asValidation)
        : await admin.createCredential(actor, request.body).catch(asValidation)
      reply.code(201)
      return meta
    },
  )

  app.get(
    '/credentials',
    { config: { permission: AUTH_WRITE }, schema: { response: { 200: { type: 'object', required: ['credentials'], properties: { credentials: { type: 'array', items: credentialSchema } } } } } },
    async (request) => {
      const p = request.principal!
      const own = ownOnly(request)
      if (own && p.kind !== 'session') return { credentials: [] }
      return { credentials: await materialAdmin(deps).listCredentials({ orgId: p.org.id, userId: p.userId }, own ? { owner: p.userId } : {}) }
    },
  )

  app.get<{ Params: { id: string } }>(
    '/credentials/:id',
    { config: { permission: AUTH_WRITE }, schema: { params: idParams, response: { 200: credentialSchema } } },
    async (request) => reachableCredential(materialAdmin(deps), request, request.params.id),
  )

  app.delete<{ Params: { id: string } }>(
    '/credentials/:id',
    { config: { permission: AUTH_WRITE }, schema: { params: idParams, response: { 200: statusOnly('deleted') } } },
    async (request) => {
      const p = request.principal!
      const admin = materialAdmin(deps)
      await reachableCredential(admin, request, request.params.id)
      if (!(await admin.deleteCredential({ orgId: p.org.id, userId: p.userId }, request.params.id))) throw notFound('credential')
      return { status: 'deleted' }
    },
  )
}
