// The audit log over HTTP (spec "Audit"): query and stats, org-wide and per workspace. Parsing
// and validation of the filter/cursor/stats grammar live in src/audit; this file decides who may
// see what: `audit:read:own` narrows to the caller's user_id, workspace variants do not narrow.
import type { FastifyInstance } from 'fastify'
import { auditStats, flushWithin, queryAudit, type AuditQueryInput, type AuditStatsInput } from '../../audit/index.js'
import { idParams } from '../schemas/common.js'
import { auditPageSchema, statsSchema } from '../../contract/index.js'
import { auditQuerystring, statsQuerystring } from '../schemas/audit.js'
import type { ServerDeps } from '../types.js'
import { requireWorkspace } from '../workspace-access.js'

const AUDIT_READ = [['audit:read', 'audit:read:own']] as const
const WORKSPACE_AUDIT_READ = [['workspace:read', 'workspace:read:own'], ['audit:read', 'audit:read:own']] as const

/**
 * At most this long a read waits for this process's acknowledged events to reach the database:
 * with the journal on they may be waiting for their batch to fill (dbLingerMs), and a caller who
 * saw an effect (a task's end, a proxied answer) expects its rows. Bounded, so a read never waits
 * out a database outage (the query then fails or answers on its own).
 */
const CATCH_UP_MS = 1_000

export async function auditRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  app.get<{ Querystring: AuditQueryInput }>(
    '/audit',
    { config: { permission: AUDIT_READ }, schema: { querystring: auditQuerystring, response: { 200: auditPageSchema } } },
    async (request) => {
      const p = request.principal!
      await flushWithin(deps.audit, CATCH_UP_MS)
      return queryAudit(deps.store, p.org.id, request.query, request.grants[0].scope === 'own' ? { userId: p.userId } : undefined)
    },
  )

  app.get<{ Querystring: AuditStatsInput }>(
    '/audit/stats',
    { config: { permission: AUDIT_READ }, schema: { querystring: statsQuerystring, response: { 200: statsSchema } } },
    async (request) => {
      const p = request.principal!
      await flushWithin(deps.audit, CATCH_UP_MS)
      return auditStats(deps.store, p.org.id, request.query, request.grants[0].scope === 'own' ? { userId: p.userId } : undefined)
    },
  )

  app.get<{ Params: { id: string }; Querystring: AuditQueryInput }>(
    '/workspaces/:id/audit',
    { config: { permission: WORKSPACE_AUDIT_READ }, schema: { params: idParams, querystring: auditQuerystring, response: { 200: auditPageSchema } } },
    async (request) => {
      const ws = await requireWorkspace(deps, request, request.params.id)
      await flushWithin(deps.audit, CATCH_UP_MS)
      return queryAudit(deps.store, request.principal!.org.id, request.query, { workspaceId: ws.id })
    },
  )

  app.get<{ Params: { id: string }; Querystring: AuditStatsInput }>(
    '/workspaces/:id/audit/stats',
    { config: { permission: WORKSPACE_AUDIT_READ }, schema: { params: idParams, querystring: statsQuerystring, response: { 200: statsSchema } } },
    async (request) => {
      const ws = await requireWorkspace(deps, request, request.params.id)
      await flushWithin(deps.audit, CATCH_UP_MS)
      return auditStats(deps.store, request.principal!.org.id, request.query, { workspaceId: ws.id })
    },
  )
}
