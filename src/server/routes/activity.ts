// Live activity streams (spec "Live stream"): SSE framing, heartbeats, maximum duration and
// gap-free resume are src/audit's streamActivity; this file authorises and scopes. Browsers'
// EventSource cannot send headers, so these two routes also take the key as `?api_key=`.
import type { FastifyInstance } from 'fastify'
import { streamActivity } from '../../audit/index.js'
import { idParams } from '../schemas/common.js'
import { streamQuerystring } from '../schemas/audit.js'
import type { ServerDeps } from '../types.js'
import { requireWorkspace } from '../workspace-access.js'

type StreamQuery = { api_key?: string; last_event_id?: string }

export async function activityRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  const lastEventId = (headers: Record<string, unknown>, query: StreamQuery): string | undefined => {
    const h = headers['last-event-id']
    return typeof h === 'string' && h !== '' ? h : query.last_event_id
  }

  app.get<{ Querystring: StreamQuery }>(
    '/activity/stream',
    { config: { permission: [['audit:read', 'audit:read:own']], queryCredential: true }, schema: { querystring: streamQuerystring } },
    async (request, reply) => {
      const p = request.principal!
      reply.hijack()
      await streamActivity({
        store: deps.store,
        bus: deps.bus,
        orgId: p.org.id,
        reply: reply.raw,
        request: request.raw,
        lastEventId: lastEventId(request.headers, request.query),
        ...(request.grants[0].scope === 'own' ? { userId: p.userId } : {}),
        ...deps.config.stream,
      })
    },
  )

  app.get<{ Params: { id: string }; Querystring: StreamQuery }>(
    '/workspaces/:id/activity/stream',
    { config: { permission: [['workspace:read', 'workspace:read:own']], queryCredential: true }, schema: { params: idParams, querystring: streamQuerystring } },
    async (request, reply) => {
      const ws = await requireWorkspace(deps, request, request.params.id)
      reply.hijack()
      await streamActivity({
        store: deps.store,
        bus: deps.bus,
        orgId: request.principal!.org.id,
        reply: reply.raw,
        request: request.raw,
        lastEventId: lastEventId(request.headers, request.query),
        workspaceId: ws.id,
        ...deps.config.stream,
      })
    },
  )
}
