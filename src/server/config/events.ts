// What the configuration services (providers, agent roles) share after a change: who made it, the
// audit event recording it, and the respawn of idle workspaces that must pick it up.
import type { FastifyRequest } from 'fastify'
import type { EventType } from '../../contract/index.js'
import { auditedMutation } from '../../audit/index.js'
import { ROLES_CHANGED_CHANNEL, type StoreTransaction } from '../../store/index.js'
import type { ServerDeps } from '../types.js'

/** Who changes the configuration: the caller's org and user, and where a non-fatal failure is logged. */
export interface ConfigCaller {
  orgId: string
  /** Audit attribution (the principal's userId). */
  userId: string
  log: { warn(obj: object, msg: string): void }
}

/** What a configuration service reads from the server's dependencies. */
export type ConfigDeps = Pick<ServerDeps, 'store' | 'audit' | 'workspaceControl'>

/** The caller of an authenticated request (routes run after the auth hook, so a principal is set). */
export function configCaller(request: FastifyRequest): ConfigCaller {
  const p = request.principal!
  return { orgId: p.org.id, userId: p.userId, log: request.log }
}

/** Records one configuration-mutation event (spec Events): resource_id plus the spec's keys. */
export type RecordConfig = (type: EventType, detail: Record<string, unknown>) => void

/**
 * A configuration change and its audit events in one transaction (src/audit/mutation.ts); once it
 * committed with an event, every proxy process (every replica) loads the org's workspace policies
 * again on their next request.
 */
export async function configMutation<T>(deps: Pick<ServerDeps, 'audit' | 'store'>, caller: ConfigCaller, fn: (tx: StoreTransaction, record: RecordConfig) => Promise<T>): Promise<T> {
  let changed = false
  const out = await auditedMutation(deps.store, deps.audit, (tx, record) => {
    changed = false
    return fn(tx, (type, detail) => {
      changed = true
      record({ org_id: caller.orgId, user_id: caller.userId, event_type: type, detail })
    })
  })
  if (changed) await deps.store.notify(ROLES_CHANGED_CHANNEL, caller.orgId).catch((err: unknown) => caller.log.warn({ err }, 'role change not announced to the proxies'))
  return out
}

/** Respawns idle workspaces of the roles after a change; a failure is logged, the change stands. */
export async function restartIdleWorkspaces(deps: Pick<ServerDeps, 'workspaceControl'>, caller: ConfigCaller, roleIds: readonly string[]): Promise<void> {
  const control = deps.workspaceControl
  if (!control) return
  for (const roleId of roleIds) {
    try {
      await control.restartIdleForRole(caller.orgId, roleId)
    } catch (err) {
      caller.log.warn({ err, role_id: roleId }, 'restarting idle workspaces after a configuration change failed')
    }
  }
}
