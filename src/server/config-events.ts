// What the configuration routes (providers, agent roles, packs) share after a change: the audit
// event recording it, and the respawn of idle workspaces that must pick it up.
import type { FastifyRequest } from 'fastify'
import type { EventType } from '../contract/index.js'
import type { ServerDeps } from './types.js'

/** Configuration-mutation events (spec Events): category audit, actor control-plane, resource_id plus the spec's keys. */
export async function emitConfigEvent(deps: Pick<ServerDeps, 'audit'>, request: FastifyRequest, type: EventType, detail: Record<string, unknown>): Promise<void> {
  const p = request.principal!
  await deps.audit.emit({ org_id: p.org.id, user_id: p.userId, event_type: type, category: 'audit', actor: 'control-plane', detail })
}

/** Respawns idle workspaces of the roles after a change; a failure is logged, the change stands. */
export async function restartIdleWorkspaces(deps: Pick<ServerDeps, 'workspaceControl'>, request: FastifyRequest, orgId: string, roleIds: readonly string[]): Promise<void> {
  const control = deps.workspaceControl
  if (!control) return
  for (const roleId of roleIds) {
    try {
      await control.restartIdleForRole(orgId, roleId)
    } catch (err) {
      request.log.warn({ err, role_id: roleId }, 'restarting idle workspaces after a configuration change failed')
    }
  }
}
