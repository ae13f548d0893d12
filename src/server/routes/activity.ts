// Live activity streams (spec "Live stream"): SSE framing, heartbeats, maximum duration and
// gap-free resume are src/audit's streamActivity; this file authorises and scopes. Browsers'
// EventSource cannot send headers, so these two routes also take the key as `?api_key=`.
import type { ServerResponse } from 'node:http'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { streamActivity, type StreamActivityOptions } from '../../audit/index.js'
import { CorralError } from '../../contract/index.js'
import { isStoreUnavailable } from '../../store/index.js'
import { RETRY_AFTER_SECONDS } from '../edge.js'
import { SSE_DOC } from '../openapi.js'
import { idParams } from '../schemas/common.js'
import { streamQuerystring } from '../schemas/audit.js'
import type { ServerDeps } from '../types.js'
import { requireWorkspace } from '../workspace-access.js'

type StreamQuery = { api_key?: string; last_event_id?: string; filter?: string | string[] }

export async function activityRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  // Open streams end when the server shuts down, so draining does not wait an hour for them.
  const open = new Set<ServerResponse>()
  app.addHook('preClose', async () => {
    for (const res of open) res.end()
  })

  const stream = async (request: FastifyRequest<{ Querystring: StreamQuery }>, reply: FastifyReply, scope: Pick<StreamActivityOptions, 'workspaceId' | 'userId'>) => {
    const header = request.headers['last-event-id']
    reply.hijack()
    open.add(reply.raw)
    reply.raw.once('close', () => open.delete(reply.raw))
    try {
      await streamActivity({
        store: deps.store,
        bus: deps.bus,
        orgId: request.principal!.org.id,
        reply: reply.raw,
        request: request.raw,
        lastEventId: typeof header === 'string' && header !== '' ? header : request.query.last_event_id,
        ...(request.query.filter !== undefined ? { filter: request.query.filter } : {}),
        headers: { 'x-request-id': String(request.id) },
        ...scope,
        ...deps.config.stream,
      })
    } catch (err) {
      // Hijacked: fastify's error handler no longer writes for us, so render the envelope here.
      if (reply.raw.headersSent) return void reply.raw.destroy()
      const known = err instanceof CorralError ? err : isStoreUnavailable(err) ? new CorralError('service_unavailable', 'the database is unavailable; retry after Retry-After', 503) : undefined
      if (!known) request.log.error({ err }, 'activity stream failed')
      reply.raw.writeHead(known ? known.status : 500, {
        'content-type': 'application/json; charset=utf-8',
        'x-request-id': String(request.id),
        ...(known?.status === 503 ? { 'retry-after': String(RETRY_AFTER_SECONDS) } : {}),
      })
      reply.raw.end(JSON.stringify({
        error: {
          code: known ? known.code : 'internal_error',
          message: known ? known.message : 'internal error; quote the request id when reporting it',
          request_id: String(request.id),
          ...(known?.details ? { details: known.details } : {}),
        },
      }))
    }
  }

  app.get<{ Querystring: StreamQuery }>(
    '/activity/stream',
    { config: { permission: [['audit:read', 'audit:read:own']], queryCredential: true, openapi: SSE_DOC }, schema: { querystring: streamQuerystring } },
    async (request, reply) => {
      await stream(request, reply, request.grants[0].scope === 'own' ? { userId: request.principal!.userId } : {})
    },
  )

  app.get<{ Params: { id: string }; Querystring: StreamQuery }>(
    '/workspaces/:id/activity/stream',
    { config: { permission: [['workspace:read', 'workspace:read:own']], queryCredential: true, openapi: SSE_DOC }, schema: { params: idParams, querystring: streamQuerystring } },
    async (request, reply) => {
      const ws = await requireWorkspace(deps, request, request.params.id)
      await stream(request, reply, { workspaceId: ws.id })
    },
  )
}
