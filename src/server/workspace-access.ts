// Workspace-scoped routes (audit, stats, activity stream, workspaces, tasks) check the workspace
// exists in the caller's org and, for a `:own` grant, that the caller created it (spec: creator match).
import type { FastifyRequest } from 'fastify'
import { apiError } from '../contract/index.js'
import type { WorkspaceRecord } from '../store/index.js'
import type { WorkspaceService } from '../workspaces/index.js'
import type { ServerDeps } from './types.js'

/** `grantIndex` is the position of the workspace-read alternative in the route's requirement. */
export async function requireWorkspace(deps: ServerDeps, request: FastifyRequest, id: string, grantIndex = 0): Promise<{ id: string; created_by: string }> {
  const principal = request.principal!
  const workspace = deps.workspaces ? await deps.workspaces.get(principal.org.id, id) : undefined
  if (!workspace) throw apiError('workspace_not_found', `workspace ${id} not found`)
  if (request.grants[grantIndex]?.scope === 'own' && workspace.created_by !== principal.creatorId) {
    throw apiError('permission_denied', 'workspace:read:own only covers workspaces you created')
  }
  return workspace
}

/** The workspace if it exists in the caller's org and (for a `:own` grant) the caller created it. */
export async function ownedWorkspace(controller: WorkspaceService, request: FastifyRequest, id: string, grantIndex = 0): Promise<WorkspaceRecord> {
  const p = request.principal!
  const ws = await controller.get(p.org.id, id)
  if (!ws) throw apiError('workspace_not_found', `workspace ${id} not found`)
  if (request.grants[grantIndex]?.scope === 'own' && ws.created_by !== p.creatorId) {
    throw apiError('permission_denied', 'your :own permission only covers workspaces you created')
  }
  return ws
}
