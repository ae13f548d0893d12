// What the lifecycle writes besides workspace state: its audit rows (category and actor from the
// contract's EVENT_KINDS) and a task's end, which is written once (first writer
// wins) and announced so every proxy stops taking the task's token.
import type { Logger } from 'pino'
import { auditedMutation, flushWithin } from '../audit/index.js'
import { apiError, type AuditSink, type EventType, type NewAuditEvent } from '../contract/index.js'
import { TASK_ENDED_CHANNEL, type Store, type StoreTransaction, type WorkspaceRecord } from '../store/index.js'

export type TaskEnd = 'completed' | 'failed' | 'cancelled'

/** At most this long a task's end waits for its acknowledged audit rows to reach the database. */
const CATCH_UP_MS = 1_000

/** Records one lifecycle event of a workspace (and task) in the mutation's transaction. */
export type RecordLifecycle = (ws: WorkspaceRecord, type: EventType, userId: string, detail?: Record<string, unknown>, taskId?: string) => void

function lifecycleEvent(ws: WorkspaceRecord, type: EventType, userId: string, detail?: Record<string, unknown>, taskId?: string): NewAuditEvent {
  return {
    org_id: ws.org_id, user_id: userId, event_type: type,
    workspace_id: ws.id, agent_role: ws.role_name, agent_provider: ws.provider_name,
    ...(taskId ? { task_id: taskId } : {}), ...(detail ? { detail } : {}),
  }
}

export class LifecycleRecords {
  readonly #store: Store
  readonly #audit: AuditSink
  readonly #logger: Logger | undefined

  constructor(store: Store, audit: AuditSink, logger?: Logger) {
    this.#store = store
    this.#audit = audit
    this.#logger = logger
  }

  /** An event with no state change of its own (a respawn of the agent). */
  async emit(ws: WorkspaceRecord, type: EventType, userId: string, detail?: Record<string, unknown>, taskId?: string): Promise<void> {
    await this.#audit.emit(lifecycleEvent(ws, type, userId, detail, taskId))
  }

  /** A state change and its lifecycle events in one transaction (src/audit/mutation.ts). */
  mutate<T>(fn: (tx: StoreTransaction, record: RecordLifecycle) => Promise<T>): Promise<T> {
    return auditedMutation(this.#store, this.#audit, (tx, record) => fn(tx, (...args) => record(lifecycleEvent(...args))))
  }

  /** Ends a task once (first writer wins) and records `task_completed`; false when it had ended. */
  async finishTask(ws: WorkspaceRecord, taskId: string, status: TaskEnd, reason?: string, summary?: string): Promise<boolean> {
    // The task's own rows (its agent's proxied requests, acknowledged from the journal and waiting
    // for a database batch) are committed before its end, so a reader that stops at
    // task_completed (`task submit --wait`, the console) has seen them. Bounded: an outage of the
    // database must not hold a task's end.
    await flushWithin(this.#audit, CATCH_UP_MS)
    const ended = await this.mutate(async (tx, record) => {
      if (!(await tx.workspaces.tasks.finish(taskId, status, reason, summary))) return false
      record(ws, 'task_completed', ws.created_by_user_id, { status, ...(reason ? { reason } : {}) }, taskId)
      return true
    })
    if (!ended) return false
    // Every proxy stops taking the task's token for outbound traffic (task-liveness.ts).
    await this.#store.notify(TASK_ENDED_CHANNEL, `${ws.id}/${taskId}`).catch((err: unknown) => this.#logger?.warn({ err, task_id: taskId }, 'task end not announced'))
    return true
  }

  /** The workspace in the org, or `workspace_not_found`. */
  async mustGet(orgId: string, id: string): Promise<WorkspaceRecord> {
    const ws = await this.#store.workspaces.get(orgId, id)
    if (!ws) throw apiError('workspace_not_found', `workspace ${id} not found`)
    return ws
  }
}
