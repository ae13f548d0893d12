// The proxy, as the API hands it to people (`corral ca export` and `corral admin
// proxy-token` against the server one is logged in to, never a data dir's files). Additions to the
// spec, documented in docs/api.md "Proxy access":
// - GET /v1/proxy/ca: the CA certificate the workspaces trust (public by nature; a workspace reader
//   may fetch it), never its key;
// - POST /v1/workspaces/{id}/proxy-token: a capability token for that workspace (optionally scoped
//   to one of its tasks), to reproduce its traffic through the proxy. The token is a bearer secret
//   that spends the workspace's budgets and uses its credentials, so the route takes the unscoped
//   `workspace:write` (an operator's, as stop-workspaces), and every token is audited
//   (`proxy_token_minted`: workspace, task, expiry and the caller — never the token).
import type { FastifyInstance } from 'fastify'
import { apiError } from '../../contract/index.js'
import { dateTime, idParams } from '../schemas/common.js'
import type { ProxyAccess, ServerDeps } from '../types.js'
import { requireWorkspace } from '../workspace-access.js'

const MAX_TTL_SECONDS = 7 * 24 * 3600
const DEFAULT_TTL_SECONDS = 600

function access(deps: ServerDeps): ProxyAccess {
  if (!deps.proxyAccess) throw apiError('service_unavailable', 'this server runs no proxy (no CA, no capability tokens)')
  return deps.proxyAccess
}

export async function proxyAccessRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  app.get(
    '/proxy/ca',
    {
      config: { permission: [['workspace:read', 'workspace:read:own']] },
      schema: { response: { 200: { type: 'object', required: ['pem', 'fingerprint_sha256'], properties: { pem: { type: 'string' }, fingerprint_sha256: { type: 'string' } } } } },
    },
    async () => {
      const a = access(deps)
      return { pem: a.caPem, fingerprint_sha256: a.caFingerprint }
    },
  )

  app.post<{ Params: { id: string }; Body: { task_id?: string; ttl_seconds?: number } }>(
    '/workspaces/:id/proxy-token',
    {
      config: { permission: [['workspace:write']] },
      schema: {
        params: idParams,
        body: {
          type: 'object', additionalProperties: false,
          properties: { task_id: { type: 'string', minLength: 1, maxLength: 200 }, ttl_seconds: { type: 'integer', minimum: 1, maximum: MAX_TTL_SECONDS } },
        },
        response: {
          201: {
            type: 'object', required: ['token', 'workspace_id', 'org_id', 'expires_at'],
            properties: { token: { type: 'string' }, workspace_id: { type: 'string' }, org_id: { type: 'string' }, task_id: { type: 'string' }, expires_at: dateTime },
          },
        },
      },
    },
    async (request, reply) => {
      const a = access(deps)
      const p = request.principal!
      const ws = await requireWorkspace(deps, request, request.params.id)
      const taskId = request.body?.task_id
      if (taskId !== undefined) {
        const task = await deps.store.workspaces.tasks.get(p.org.id, taskId)
        if (!task || task.workspace_id !== ws.id) throw apiError('not_found', `task ${taskId} not found in workspace ${ws.id}`)
      }
      const ttl = request.body?.ttl_seconds ?? DEFAULT_TTL_SECONDS
      const minted = await a.tokens.mint({ org_id: p.org.id, workspace_id: ws.id, ...(taskId ? { task_id: taskId } : {}) }, ttl)
      await deps.audit.emit({
        org_id: p.org.id, user_id: p.userId, workspace_id: ws.id, ...(taskId ? { task_id: taskId } : {}),
        event_type: 'proxy_token_minted',
        detail: { resource_id: ws.id, ttl_seconds: ttl, expires_at: minted.expires_at },
      })
      reply.code(201)
      return { token: minted.token, workspace_id: ws.id, org_id: p.org.id, ...(taskId ? { task_id: taskId } : {}), expires_at: minted.expires_at }
    },
  )
}
