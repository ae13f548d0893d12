// Desired vs actual state (docs/workspaces.md "Model", "Crash safety"). The store holds the actual
// state (`state`) and what the API asked for (`desired_state`); a reconcile step moves one toward
// the other under the workspace's lock: provision, start the next queued task, arm the idle stop,
// warm a pool member, or stop. Every unsettled workspace is visited at start and on a slow timer,
// so a crash of `serve` in the middle of a provision, a task or a stop leaves nothing stuck.
import type { Logger } from 'pino'
import type { ProvisionSpec, WorkspaceRuntime } from '../runtime/index.js'
import { WORKSPACE_STOPPED_CHANNEL, type Store, type WorkspaceRecord, type WorkspacesRepository } from '../store/index.js'
import type { DiskQuota } from './disk-quota.js'
import type { HandOver } from './hand-over.js'
import type { AgentLauncher } from './launcher.js'
import type { WorkspaceLocks } from './locks.js'
import type { Lifetime } from './options.js'
import type { Ownership } from './ownership.js'
import type { LifecycleRecords } from './records.js'
import type { TaskRunner } from './task-runner.js'

/** States in which a workspace has something running for it on a replica: they need the lease. */
const LIVE_STATES: ReadonlySet<string> = new Set(['provisioning', 'idle', 'busy', 'stopping'])

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
  /** Which replica acts on a workspace (ownership.ts); SOLO_OWNERSHIP on one process. */
  ownership: Ownership
  /** One pass of the warm pools (after every full reconcile). */
  fillPools: () => Promise<void>
  intervalMs?: number
  logger?: Logger
  /** The workspace's own host uid for its agent (the store's allocation, docs/runtime.md "One uid per workspace"); unset: the driver's own. */
  agentUid?: (workspaceId: string) => Promise<number>
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
    // Workspaces another live replica owns are its business (it reconciles them itself).
    const elsewhere = await this.#o.ownership.ownedElsewhere(ids).catch(() => new Set<string>())
    await Promise.all(ids.filter((id) => !elsewhere.has(id)).map((id) => this.kick(id, false)))
    await this.#o.fillPools()
  }

  /**
   * Schedules a reconcile of one workspace; resolves when it ran. When another replica owns the
   * workspace, `nudge` (default) asks that owner to reconcile it instead (a change written here).
   */
  kick(workspaceId: string, nudge = true): Promise<void> {
    return this.#o.locks.run(workspaceId, () => this.#reconcile(workspaceId, nudge)).catch((err: unknown) => {
      this.#o.logger?.error({ err, workspace_id: workspaceId }, 'workspace reconcile failed')
    })
  }

  /**
   * The workspace as this replica may act on it (caller holds the lock): claims its lease when it
   * is live, taking it over from a replica that stopped beating; undefined when another replica
   * owns it (or the takeover ended it).
   */
  async own(ws: WorkspaceRecord): Promise<WorkspaceRecord | undefined> {
    if (!LIVE_STATES.has(ws.state)) return ws
    const claim = await this.#o.ownership.claim(ws.id)
    if (!claim.owned) return undefined
    return claim.takeover ? this.#takeOver(ws, claim.takeover) : ws
  }

  async #reconcile(id: string, nudge: boolean): Promise<void> {
    if (this.#o.lifetime.closed) return
    const found = await this.#t.byId(id)
    if (!found) return
    let ws = await this.own(found)
    if (!ws) {
      if (nudge && LIVE_STATES.has(found.state)) await this.#o.ownership.nudge(id)
      return
    }
    // A task cancelled through another replica: its agent runs here, so it is stopped here.
    const runningId = this.#o.runner.runningTask(ws.id)
    if (runningId && (await this.#t.tasks.byId(runningId))?.status === 'cancelled') await this.#o.runner.stopIfRunning(ws.id, runningId)
    if (ws.state === 'provisioning') {
      if (ws.desired_state !== 'running') {
        await this.stopNow(ws, (await this.#t.desiredBy(ws.id)) ?? ws.created_by_user_id)
        return
      }
      if (!(await this.#provision(ws))) return
      ws = (await this.#t.byId(id))!
    }
    if ((ws.state === 'idle' || ws.state === 'busy') && ws.desired_state !== 'running') {
      // The stop or archive may have been asked on another replica: its caller is named, not the creator.
      const by = (await this.#t.desiredBy(ws.id)) ?? ws.created_by_user_id
      await this.stopNow(ws, by)
      if (ws.desired_state === 'archived') await this.archived(ws, by)
      return
    }
    if (ws.state === 'busy' && !this.#o.runner.isRunning(ws.id)) {
      // The agent of this task died with a previous serve: fail the task cleanly, keep the workspace.
      for (const t of await this.#t.tasks.running(ws.id)) await this.#o.records.finishTask(ws, t.id, 'failed', 'interrupted')
      await this.#t.transition(ws.id, ['busy'], 'idle')
      ws = (await this.#t.byId(id))!
    }
    if (ws.state === 'stopping') {
      await this.stopNow(ws, (await this.#t.desiredBy(ws.id)) ?? ws.created_by_user_id)
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

  /** What the driver provisions: the workspace, where /data comes from, and its agent's uid. */
  async #spec(ws: WorkspaceRecord): Promise<ProvisionSpec> {
    return provisionSpec(ws, await this.#o.agentUid?.(ws.id))
  }

  async #provision(ws: WorkspaceRecord): Promise<boolean> {
    try {
      const handle = await this.#o.runtime.provision(await this.#spec(ws))
      this.#o.disk.remember(ws.id, handle.volume)
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err)
      this.#o.logger?.error({ err, workspace_id: ws.id }, 'provisioning failed')
      await this.#t.update(ws.id, { state: 'stopped', desired_state: 'stopped', failure: message.slice(0, 500) })
      await this.#finishQueued(ws, 'failed', 'provision_failed')
      return false
    }
    await this.#o.records.mutate(async (tx, record) => {
      if (await tx.workspaces.transition(ws.id, ['provisioning'], 'idle', { failure: null })) record(ws, 'workspace_provisioned', ws.created_by_user_id)
    })
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
      await this.#stopped(ws, actorUserId, { state: 'stopped' })
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
    let patch: Parameters<WorkspacesRepository['update']>[1]
    try {
      const snap = await this.#o.runtime.stop(ws.id, count)
      patch = { state: 'stopped', task_count: count, last_snapshot_ref: snap.ref, stopped_once: 1 }
    } catch (err) {
      // A stop must end: without the snapshot the workspace is still stopped (and says why),
      // rather than retried by every reconcile.
      this.#o.logger?.error({ err, workspace_id: ws.id }, 'stop snapshot failed')
      await this.#o.runtime.stopAgent(ws.id).catch(() => {})
      const message = err instanceof Error ? err.message : String(err)
      patch = { state: 'stopped', task_count: count, failure: `stop snapshot failed: ${message}`.slice(0, 500) }
    }
    await this.#stopped(ws, actorUserId, patch)
  }

  /**
   * A stopped workspace becomes archived: its /data (a directory, a PersistentVolumeClaim) is
   * released once the stop snapshot holds all of it, so an archived workspace keeps only its
   * snapshots; a task after unarchive restores /data from them like a restart on another replica
   * (docs/workspaces.md "Archive retention"). Without that snapshot /data stays.
   */
  async archived(ws: WorkspaceRecord, actorUserId: string): Promise<void> {
    await this.#o.records.mutate(async (tx, record) => {
      await tx.workspaces.update(ws.id, { state: 'archived', archived_at: new Date().toISOString() })
      record(ws, 'workspace_archived', actorUserId)
    })
    try {
      const fresh = await this.#t.byId(ws.id)
      const last = (await this.#o.runtime.snapshots(ws.id)).at(-1)
      if (fresh?.state === 'archived' && last?.reason === 'stop' && last.ref === fresh.last_snapshot_ref) await this.#o.runtime.release(ws.id)
    } catch (err) {
      this.#o.logger?.warn({ err, workspace_id: ws.id }, 'archived workspace: /data not released (it is kept)')
    }
  }

  /** Writes the stopped state (`patch`, when not written already) with its `workspace_stopped`, then lets the workspace go. */
  async #stopped(ws: WorkspaceRecord, actorUserId: string | undefined, patch: Parameters<WorkspacesRepository['update']>[1]): Promise<void> {
    await this.#o.records.mutate(async (tx, record) => {
      if (Object.keys(patch).length > 0) await tx.workspaces.update(ws.id, patch)
      record(ws, 'workspace_stopped', actorUserId ?? ws.created_by_user_id)
    })
    await this.#o.store.notify(WORKSPACE_STOPPED_CHANNEL, ws.id)
    // A stopped workspace runs nowhere: no replica needs to own it (a task restarts it anywhere).
    await this.#o.ownership.release(ws.id).catch((err: unknown) => this.#o.logger?.warn({ err, workspace_id: ws.id }, 'workspace lease not released'))
  }

  /**
   * Takes over a workspace whose owner stopped heartbeating (docs/workspaces.md "Takeover"). A
   * driver that can adopt it (its agent kept running) keeps the task going; otherwise the running
   * task fails `replica_lost` and /data comes back from the last snapshot, and the workspace is
   * `idle` again (a queued task then starts here). Caller holds the lock.
   */
  async #takeOver(ws: WorkspaceRecord, previousOwner: string): Promise<WorkspaceRecord | undefined> {
    this.#o.logger?.warn({ workspace_id: ws.id, previous_owner: previousOwner, state: ws.state }, 'taking over a workspace from a replica that stopped heartbeating')
    // A driver whose agents outlive their replica (Kubernetes) keeps the running task going here.
    const running = ws.state === 'busy' ? (await this.#t.tasks.running(ws.id))[0] : undefined
    const adoption = this.#o.runtime.capabilities.adoption
    const agent = running && adoption ? (await adoption.adopt([ws.id]))[0] : undefined
    if (running && agent) {
      const handle = await this.#o.runtime.provision(await this.#spec(ws)) // re-adopts its /data
      this.#o.disk.remember(ws.id, handle.volume)
      await this.#o.runner.attach(ws, running, agent.process)
      return ws
    }
    for (const t of await this.#t.tasks.running(ws.id)) await this.#o.records.finishTask(ws, t.id, 'failed', 'replica_lost')
    if (ws.state === 'provisioning') return ws // the reconcile step provisions it
    try {
      const handle = await this.#o.runtime.provision(await this.#spec(ws))
      this.#o.disk.remember(ws.id, handle.volume)
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err)
      this.#o.logger?.error({ err, workspace_id: ws.id }, 'takeover: /data could not be restored')
      await this.#t.update(ws.id, { state: 'stopped', desired_state: 'stopped', failure: `taken over from replica ${previousOwner}; /data could not be restored: ${message}`.slice(0, 500) })
      await this.#finishQueued(ws, 'failed', 'provision_failed')
      await this.#stopped(ws, undefined, {})
      return undefined
    }
    await this.#t.transition(ws.id, ['busy'], 'idle')
    return this.#t.byId(ws.id)
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
        await this.#t.update(ws.id, { desired_state: 'stopped', desired_by: null })
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

/**
 * Where a workspace's /data comes from: what this replica has (re-adopted), else the snapshot
 * after its last completed task (a restart or a takeover on another replica), else a fork's
 * parent snapshot, else empty.
 */
function provisionSpec(ws: WorkspaceRecord, agentUid: number | undefined): ProvisionSpec {
  const base = { ...(agentUid === undefined ? {} : { agentUid }), workspaceId: ws.id, owner: { orgId: ws.org_id, roleId: ws.role_id }, ...(ws.pooled ? { pooled: true } : {}) }
  if (ws.task_count > 0) return { ...base, forkFrom: { workspaceId: ws.id, taskCount: ws.task_count } }
  if (ws.parent_workspace_id && ws.fork_point_task_count) return { ...base, forkFrom: { workspaceId: ws.parent_workspace_id, taskCount: ws.fork_point_task_count } }
  return base
}
