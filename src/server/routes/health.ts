// Liveness and readiness, outside /v1 and without auth (orchestrators probe them).
import type { FastifyInstance } from 'fastify'
import { apiError } from '../errors.js'
import type { ServerDeps } from '../types.js'

const statusSchema = { type: 'object', required: ['status'], properties: { status: { type: 'string' } } } as const

export async function healthRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  app.get('/healthz', { config: { auth: false }, schema: { response: { 200: statusSchema } } }, async () => ({ status: 'ok' }))
  app.get('/readyz', { config: { auth: false }, schema: { response: { 200: statusSchema } } }, async (request) => {
    try {
      await deps.store.ping()
    } catch (err) {
      request.log.warn({ err }, 'store unreachable')
      throw apiError('service_unavailable', 'the store is unreachable')
    }
    return { status: 'ready' }
  })
}
