// Liveness and readiness, outside /v1 and without auth (orchestrators probe them).
import type { FastifyInstance } from 'fastify'
import { apiError } from '../../contract/index.js'
import type { ServerDeps } from '../types.js'

const statusSchema = { type: 'object', required: ['status'], properties: { status: { type: 'string' } } } as const

export async function healthRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  // Liveness, plus the audit writer's counters for operators (docs/audit.md "Counters").
  const healthSchema = { ...statusSchema, properties: { ...statusSchema.properties, audit: { type: 'object', additionalProperties: true } } }
  app.get('/healthz', { config: { auth: false }, schema: { response: { 200: healthSchema } } }, async () => ({
    status: 'ok',
    ...(typeof deps.audit.stats === 'function' ? { audit: deps.audit.stats() } : {}),
  }))
  app.get('/readyz', { config: { auth: false }, schema: { response: { 200: statusSchema } } }, async (request) => {
    // Draining (SIGTERM): not ready, while every other request is still served (docs/kubernetes.md).
    if (deps.draining?.()) throw apiError('service_unavailable', 'the server is draining (shutting down); retry on another replica')
    try {
      await deps.store.ping()
    } catch (err) {
      request.log.warn({ err }, 'store unreachable')
      throw apiError('service_unavailable', 'the store is unreachable')
    }
    return { status: 'ready' }
  })
}
