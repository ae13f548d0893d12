// Every /v1 resource plugin, in the order of the spec. Each is registered in its own
// encapsulated scope under /v1 with the same ServerDeps; adding a resource is one line here.
// (The proxy part adds secrets and credentials; the workspace part adds tasks, workspaces, roles.)
import type { FastifyInstance } from 'fastify'
import type { TaskLimiter } from '../task-input.js'
import type { ServerDeps } from '../types.js'
import { activityRoutes } from './activity.js'
import { agentRoleRoutes } from './agent-roles.js'
import { apiKeyRoutes } from './api-keys.js'
import { auditRoutes } from './audit.js'
import { auditLogRoutes } from './audit-log.js'
import { capsRoutes } from './caps.js'
import { credentialRoutes } from './credentials.js'
import { oauthRoutes } from './oauth.js'
import { orgRoutes } from './orgs.js'
import { packRoutes } from './packs.js'
import { providerRoutes } from './providers.js'
import { proxyAccessRoutes } from './proxy-access.js'
import { secretRoutes } from './secrets.js'
import { taskRoutes } from './tasks.js'
import { webhookRoutes } from './webhooks.js'
import { snapshotContentRoutes } from './snapshot-content.js'
import { workspaceLogRoutes } from './workspace-logs.js'
import { workspaceRoutes } from './workspaces.js'

/** What buildApp makes once and several plugins share (one task bucket for create and follow-up). */
export interface SharedRouteState {
  taskLimiter: TaskLimiter
}

export type RoutePlugin = (app: FastifyInstance, deps: ServerDeps, shared: SharedRouteState) => Promise<void>

export const V1_ROUTES: readonly RoutePlugin[] = [
  apiKeyRoutes,
  auditRoutes,
  auditLogRoutes,
  activityRoutes,
  orgRoutes,
  webhookRoutes,
  secretRoutes,
  credentialRoutes,
  oauthRoutes,
  providerRoutes,
  agentRoleRoutes,
  packRoutes,
  taskRoutes,
  workspaceRoutes,
  workspaceLogRoutes,
  snapshotContentRoutes,
  proxyAccessRoutes,
  capsRoutes,
]
