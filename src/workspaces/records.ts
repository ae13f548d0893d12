// What the lifecycle writes besides workspace state: its audit rows (category and actor from the
// contract's EVENT_KINDS) and a task's end, which is written once (first writer
// wins) and announced so every proxy stops taking the task's token.
import type { Logger } from 'pino'
import { apiError, type AuditSink, type EventType, type NewAuditEvent } from '../contract/index.js'
import { TASK_ENDED_CHANNEL, type Store, type WorkspaceRecord } from '../store/index.js'

export type TaskEnd = 'completed' | 'failed' | 'cancelled'

export class LifecycleRecords {
  readonly #store: Store
  readonly #audit: AuditSink
  readonly #logger: Logger | undefined

  constructor(store: Store, audit: AuditSink, logger?: Logger) {
    this.#store = store
    this.#audit = audit
    this.#logger = logger
  }

  async emit(ws: WorkspaceRecord, type: EventType, userId: string, detail?: Record<string, unknown>, taskId?: string): Promise<void> {
    const event: NewAuditEvent = {
      org_id: ws.org_id, user_id: userId, event_type: type,
      workspace_id: ws.id, agent_role: ws.role_name, agent_provider: ws.provider_name,
      ...(taskId ? { task_id: taskId } : {}), ...(detail ? { detail } : {}),
    }
    await this.#audit.emit(event)
  }

  /** Ends a task once (first writer wins) and records `task_completed`; false when it had ended. */
  async finishTask(ws: WorkspaceRecord, taskId: string, status: TaskEnd, reason?: string, summary?: string): Promise<boolean> {
    if (!(await this.#store.workspaces.tasks.finish(taskId, status, reason, summary))) return false
    // Every proxy stops taking the task's token for outbound traffic (task-liveness.ts).
    await this.#store.notify(TASK_ENDED_CHANNEL, `${ws.id}/${taskId}`).catch((err: unknown) => this.#logger?.warn({ err, task_id: taskId }, 'task end not announced'))
    await this.emit(ws, 'task_completed', ws.created_by_user_id, { status, ...(reason ? { reason } : {}) }, taskId)
    return true
  }

  /** The workspace in the org, or `workspace_not_found`. */
  async mustGet(orgId: string, id: string): Promise<WorkspaceRecord> {
    const ws = await this.#store.workspaces.get(orgId, id)
    if (!ws) throw apiError('workspace_not_found', `workspace ${id} not found`)
    return ws
  }
}
