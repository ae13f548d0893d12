// Desired vs actual state (docs/workspaces.md "Model", "Crash safety"). The store holds the actual
// state (`state`) and what the API asked for (`desired_state`); a reconcile step moves one toward
// the other under the workspace's lock: provision, start the next queued task, arm the idle stop,
// warm a pool member, or stop. Every unsettled workspace is visited at start and on a slow timer,
// so a crash of `serve` in the middle of a provision, a task or a stop leaves nothing stuck.
import type { Logger } from 'pino'
import type { WorkspaceRuntime } from '../runtime/index.js'
import { WORKSPACE_STOPPED_CHANNEL, type Store, type WorkspaceRecord, type WorkspacesRepository } from '../store/index.js'
import type { DiskQuota } from './disk-quota.js'
import type { HandOver } from './hand-over.js'
import type { AgentLauncher } from './launcher.js'
import type { WorkspaceLocks } from './locks.js'
import type { Lifetime } from './options.js'
import type { LifecycleRecords } from './records.js'
import type { TaskRunner } from './task-runner.js'

export interface ReconcilerOptions {
  store: Store
  runtime: WorkspaceRuntime
  records: LifecycleRecords
  locks: WorkspaceLocks
  runner: TaskRunner
  handOver: HandOver
  launcher: AgentLauncher
  disk: DiskQuota
  lifetime: Lifetime
  /** One pass of the warm pools (after every full reconcile). */
  fillPools: () => Promise<void>
  intervalMs?: number
  logger?: Logger
}

export class Reconciler {
  readonly #o: ReconcilerOptions
  readonly #t: WorkspacesRepository
  readonly #idleTimers = new Map<string, NodeJS.Timeout>()
  #interval: NodeJS.Timeout | undefined

  constructor(options: ReconcilerOptions) {
    this.#o = options
    this.#t = options.store.workspaces
  }

  /** Reconciles everything once (crash recovery), then keeps a slow loop running as a safety net. */
  async start(): Promise<void> {
    await this.reconcileAll()
    this.#interval = setInterval(() => void this.reconcileAll(), this.#o.intervalMs ?? 5_000)
    this.#interval.unref()
  }

  close(): void {
    if (this.#interval) clearInterval(this.#interval)
    for (const t of this.#idleTimers.values()) clearTimeout(t)
  }

  async reconcileAll(): Promise<void> {
    if (this.#o.lifetime.closed) return
    const ids = await this.#t.unsettled().catch((err: unknown) => {
      this.#o.logger?.error({ err }, 'reconcile scan failed')
      return [] as string[]
    })
    await Promise.all(ids.map((id) => this.kick(id)))
    await this.#o.fillPools()
  }

  /** Schedules a reconcile of one workspace; resolves when it ran. */
  kick(workspaceId: string): Promise<void> {
    return this.#o.locks.run(workspaceId, () => this.#reconcile(workspaceId)).catch((err: unknown) => {
      this.#o.logger?.error({ err, workspace_id: workspaceId }, 'workspace reconcile failed')
    })
  }

  async #reconcile(id: string): Promise<void> {
    if (this.#o.lifetime.closed) return
    let ws = await this.#t.byId(id)
    if (!ws) return
    if (ws.state === 'provisioning') {
      if (ws.desired_state !== 'running') {
        await this.stopNow(ws)
        return
      }
      if (!(await this.#provision(ws))) return
      ws = (await this.#t.byId(id))!
    }
    if ((ws.state === 'idle' || ws.state === 'busy') && ws.desired_state !== 'running') {
      await this.stopNow(ws)
      if (ws.desired_state === 'archived') {
        await this.#t.update(ws.id, { state: 'archived', archived_at: new Date().toISOString() })
        await this.#o.records.emit(ws, 'workspace_archived', ws.created_by_user_id)
      }
      return
    }
    if (ws.state === 'busy' && !this.#o.runner.isRunning(ws.id)) {
      // The agent of this task died with a previous serve: fail the task cleanly, keep the workspace.
      for (const t of await this.#t.tasks.running(ws.id)) await this.#o.records.finishTask(ws, t.id, 'failed', 'interrupted')
      await this.#t.transition(ws.id, ['busy'], 'idle')
      ws = (await this.#t.byId(id))!
    }
    if (ws.state === 'stopping') {
      await this.stopNow(ws)
      return
    }
    if (ws.state !== 'idle') return
    const next = await this.#t.tasks.nextSubmitted(ws.id)
    if (next) {
      this.#clearIdle(ws.id)
      await this.#o.runner.start(ws, next)
    } else {
      await this.#armIdle(ws)
      if (ws.pooled) await this.#o.handOver.warmUp(ws)
    }
  }

  async #provision(ws: WorkspaceRecord): Promise<boolean> {
    try {
      const handle = await this.#o.runtime.provision({
        workspaceId: ws.id,
        owner: { orgId: ws.org_id, roleId: ws.role_id },
        ...(ws.parent_workspace_id && ws.fork_point_task_count ? { forkFrom: { workspaceId: ws.parent_workspace_id, taskCount: ws.fork_point_task_count } } : {}),
      })
      this.#o.disk.remember(ws.id, handle.volume)
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err)
      this.#o.logger?.error({ err, workspace_id: ws.id }, 'provisioning failed')
      await this.#t.update(ws.id, { state: 'stopped', desired_state: 'stopped', failure: message.slice(0, 500) })
      await this.#finishQueued(ws, 'failed', 'provision_failed')
      return false
    }
    if (await this.#t.transition(ws.id, ['provisioning'], 'idle', { failure: null })) {
      await this.#o.records.emit(ws, 'workspace_provisioned', ws.created_by_user_id)
    }
    return true
  }

  async #finishQueued(ws: WorkspaceRecord, status: 'failed' | 'cancelled', reason: string): Promise<void> {
    for (let t = await this.#t.tasks.nextSubmitted(ws.id); t; t = await this.#t.tasks.nextSubmitted(ws.id)) await this.#o.records.finishTask(ws, t.id, status, reason)
  }

  /** Tears the workspace down now (caller holds the lock): cancel its work, stop snapshot, `stopped`. */
  async stopNow(ws: WorkspaceRecord, actorUserId?: string): Promise<void> {
    this.#clearIdle(ws.id)
    this.#o.handOver.drop(ws.id)
    this.#o.launcher.forget(ws.id)
    this.#o.disk.forget(ws.id)
    if (ws.state === 'provisioning') {
      // Nothing ran yet: no snapshot to take.
      await this.#finishQueued(ws, 'cancelled', 'workspace_stopped')
      await this.#t.update(ws.id, { state: 'stopped' })
      await this.#stopped(ws, actorUserId)
      return
    }
    let count = ws.task_count
    const runningTask = this.#o.runner.takeRunning(ws.id)
    await this.#t.transition(ws.id, ['idle', 'busy', 'stopping'], 'stopping')
    if (runningTask) {
      await this.#o.records.finishTask(ws, runningTask, 'cancelled', 'workspace_stopped')
      count++
    }
    for (const t of await this.#t.tasks.running(ws.id)) await this.#o.records.finishTask(ws, t.id, 'failed', 'interrupted')
    await this.#finishQueued(ws, 'cancelled', 'workspace_stopped')
    try {
      const snap = await this.#o.runtime.stop(ws.id, count)
      await this.#t.update(ws.id, { state: 'stopped', task_count: count, last_snapshot_ref: snap.ref, stopped_once: 1 })
    } catch (err) {
      // A stop must end: without the snapshot the workspace is still stopped (and says why),
      // rather than retried by every reconcile.
      this.#o.logger?.error({ err, workspace_id: ws.id }, 'stop snapshot failed')
      await this.#o.runtime.stopAgent(ws.id).catch(() => {})
      const message = err instanceof Error ? err.message : String(err)
      await this.#t.update(ws.id, { state: 'stopped', task_count: count, failure: `stop snapshot failed: ${message}`.slice(0, 500) })
    }
    await this.#stopped(ws, actorUserId)
  }

  async #stopped(ws: WorkspaceRecord, actorUserId: string | undefined): Promise<void> {
    await this.#o.records.emit(ws, 'workspace_stopped', actorUserId ?? ws.created_by_user_id)
    await this.#o.store.notify(WORKSPACE_STOPPED_CHANNEL, ws.id)
  }

  async #armIdle(ws: WorkspaceRecord): Promise<void> {
    // Pool members wait for a claim; an idle stop would only drain and refill the pool.
    if (this.#idleTimers.has(ws.id) || ws.pooled) return
    const role = await this.#t.role(ws.org_id, { id: ws.role_id })
    const idle = role?.idle_timeout_seconds
    if (!idle || idle <= 0) return
    const timer = setTimeout(() => {
      this.#idleTimers.delete(ws.id)
      void this.#o.locks.run(ws.id, async () => {
        const now = await this.#t.byId(ws.id)
        if (now?.state !== 'idle' || (await this.#t.tasks.active(ws.id))) return
        await this.#t.update(ws.id, { desired_state: 'stopped' })
        await this.stopNow(now)
      }).catch((err: unknown) => this.#o.logger?.error({ err, workspace_id: ws.id }, 'idle stop failed'))
    }, idle * 1000)
    timer.unref()
    this.#idleTimers.set(ws.id, timer)
  }

  #clearIdle(id: string): void {
    const t = this.#idleTimers.get(id)
    if (t) clearTimeout(t)
    this.#idleTimers.delete(id)
  }
}
