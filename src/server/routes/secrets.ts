// Secrets (spec "Credentials" / event catalog): org-scoped named values, sealed at rest
// (AES-256-GCM), readable only by the proxy's transforms (`secrets["name"]`). The API returns
// names and timestamps, never a value.
import type { FastifyInstance } from 'fastify'
import { notFound } from '../../contract/index.js'
import { asValidation, materialAdmin } from '../org-material.js'
import { dateTime, statusOnly } from '../schemas/common.js'
import type { ServerDeps } from '../types.js'

const AUTH_WRITE = [['auth:write']] as const
const secretSchema = { type: 'object', required: ['name', 'created_at', 'updated_at'], properties: { name: { type: 'string' }, created_at: dateTime, updated_at: dateTime } } as const

export async function secretRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  app.post<{ Body: { name: string; value: string } }>(
    '/secrets',
    {
      config: { permission: AUTH_WRITE },
      schema: {
        body: { type: 'object', required: ['name', 'value'], additionalProperties: false, properties: { name: { type: 'string', minLength: 1, maxLength: 64 }, value: { type: 'string', minLength: 1, maxLength: 65536 } } },
        response: { 201: secretSchema },
      },
    },
    async (request, reply) => {
      const p = request.principal!
      const meta = await materialAdmin(deps).setSecret({ orgId: p.org.id, userId: p.userId }, request.body.name, request.body.value).catch(asValidation)
      reply.code(201)
      return meta
    },
  )

  app.get(
    '/secrets',
    { config: { permission: AUTH_WRITE }, schema: { response: { 200: { type: 'object', required: ['secrets'], properties: { secrets: { type: 'array', items: secretSchema } } } } } },
    async (request) => {
      const p = request.principal!
      return { secrets: await materialAdmin(deps).listSecrets({ orgId: p.org.id, userId: p.userId }) }
    },
  )

  app.delete<{ Params: { name: string } }>(
    '/secrets/:name',
    {
      config: { permission: AUTH_WRITE },
      schema: { params: { type: 'object', required: ['name'], properties: { name: { type: 'string', minLength: 1, maxLength: 64 } } }, response: { 200: statusOnly('deleted') } },
    },
    async (request) => {
      const p = request.principal!
      if (!(await materialAdmin(deps).deleteSecret({ orgId: p.org.id, userId: p.userId }, request.params.name))) throw notFound('secret')
      return { status: 'deleted' }
    },
  )
}
