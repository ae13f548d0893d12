// The workspace service: the face the routes (and serve) call — create, follow-up, cancel, stop,
// fork, archive, list, get, snapshot files — and the agent callbacks' target. It builds the parts
// of the lifecycle and wires them explicitly: records (audit rows, task ends), locks, the agent
// launcher, the disk quota, the hand-over to warm agents, the task runner, the reconcile loop and
// the warm pools. Every change to one workspace runs under that workspace's lock.
import { join } from 'node:path'
import type { AgentTask, TaskStatus as TaskOutcomeStatus } from '../contract/index.js'
import { apiError } from '../contract/index.js'
import type { SnapshotContent, SnapshotFileEntry } from '../runtime/index.js'
import { workspaceLogs, workspaceUids, type RoleConfig, type TaskRecord, type WorkspaceFilter, type WorkspaceRecord, type WorkspacesRepository } from '../store/index.js'
import type { PackEventValidators } from './agent-event-schemas.js'
import { DiskQuota } from './disk-quota.js'
import { HandOver, type PollToken, type TokenAhead } from './hand-over.js'
import { AgentLauncher } from './launcher.js'
import { WorkspaceLocks } from './locks.js'
import type { Actor, Lifetime, TaskInput, WorkspaceServiceOptions } from './options.js'
import { SOLO_OWNERSHIP, type Ownership } from './ownership.js'
import { Reconciler } from './reconcile.js'
import { LifecycleRecords } from './records.js'
import { TaskRunner } from './task-runner.js'
import { WarmPools, type PoolRole } from './warm-pools.js'

/** Resolves after the event loop's next I/O (poll) phase: two check phases apart. */
const ioPass = (): Promise<void> => new Promise((resolve) => setImmediate(() => setImmediate(resolve)))

export class WorkspaceService {
  readonly #o: WorkspaceServiceOptions
  readonly #t: WorkspacesRepository
  readonly #life: Lifetime = { closed: false }
  readonly #locks = new WorkspaceLocks()
  readonly #records: LifecycleRecords
  readonly #launcher: AgentLauncher
  readonly #handOver: HandOver
  readonly #runner: TaskRunner
  readonly #reconciler: Reconciler
  readonly #pools: WarmPools
  readonly #ownership: Ownership

  constructor(opts: WorkspaceServiceOptions) {
    this.#o = opts
    this.#t = opts.store.workspaces
    this.#ownership = opts.ownership ?? SOLO_OWNERSHIP
    const { store, runtime, tokens, logger } = opts
    const kick = (id: string): void => void this.kick(id)
    const warmAgents = opts.warmAgents !== false
    this.#records = new LifecycleRecords(store, opts.audit, logger)
    this.#launcher = new AgentLauncher({ runtime, workspaces: this.#t, agentCommand: opts.agentCommand, logs: workspaceLogs(store), ...pick(opts, 'packs', 'agentEnv', 'agentCliDirs', 'logger') })
    const disk = new DiskQuota({ runtime, quotaMb: opts.diskQuotaMb ?? 0, ...pick(opts, 'logger'), ...(opts.diskCheckIntervalMs ? { intervalMs: opts.diskCheckIntervalMs } : {}) })
    this.#handOver = new HandOver({
      runtime, workspaces: this.#t, tokens, launcher: this.#launcher, disk, lifetime: this.#life, warmAgents, kick,
      running: (id) => this.#runner.isRunning(id), ...pick(opts, 'logger'),
    })
    this.#runner = new TaskRunner({
      runtime, workspaces: this.#t, tokens, records: this.#records, locks: this.#locks, launcher: this.#launcher, disk, handOver: this.#handOver,
      lifetime: this.#life, stagingDir: (id) => this.stagingDir(id), kick, ...pick(opts, 'defaultTaskTimeoutSeconds', 'logger'),
    })
    // Each workspace's agent gets a uid of its own from the range, held in the store (workspace-uids.ts).
    const uids = opts.sandboxUids ? { range: opts.sandboxUids, table: workspaceUids(store) } : undefined
    this.#reconciler = new Reconciler({
      ...(uids ? { agentUid: (id: string) => uids.table.allocate(id, uids.range) } : {}),
      store, runtime, records: this.#records, locks: this.#locks, runner: this.#runner, handOver: this.#handOver, launcher: this.#launcher, disk,
      lifetime: this.#life, ownership: this.#ownership, fillPools: () => this.fillPools(), ...pick(opts, 'logger'), ...(opts.reconcileIntervalMs ? { intervalMs: opts.reconcileIntervalMs } : {}),
    })
    this.#pools = new WarmPools({
      store, records: this.#records, locks: this.#locks, handOver: this.#handOver, lifetime: this.#life, kick, warmAgents,
      reconcileNow: (id) => this.kick(id), ownership: this.#ownership, ...pick(opts, 'now', 'poolDemandWindowMs', 'logger'),
    })
  }

  stagingDir(taskId: string): string {
    return join(this.#o.stagingRoot, taskId)
  }

  /** Reconciles everything once (crash recovery), then keeps a slow loop running as a safety net. */
  async start(): Promise<void> {
    await this.#ownership.start({ kick: (id) => void this.kick(id, false), lost: (id) => void this.#lost(id) })
    await this.#reconciler.start()
  }

  async close(): Promise<void> {
    await this.#ownership.close()
    this.#life.closed = true
    this.#reconciler.close()
    this.#pools.close()
    this.#runner.close()
    this.#handOver.wakeAll()
    // Agents die with serve; their tasks are failed by the next start's reconcile.
    await this.#locks.drain()
  }

  reconcileAll(): Promise<void> {
    return this.#reconciler.reconcileAll()
  }

  /** Schedules a reconcile of one workspace (or asks the replica that owns it to); resolves when it ran. */
  kick(workspaceId: string, nudge = true): Promise<void> {
    return this.#reconciler.kick(workspaceId, nudge)
  }

  /** Another replica took the workspace over (this one missed its heartbeats): let go of it here, writing nothing. */
  async #lost(workspaceId: string): Promise<void> {
    await this.#locks.run(workspaceId, async () => {
      this.#runner.takeRunning(workspaceId)
      this.#handOver.drop(workspaceId)
      this.#launcher.forget(workspaceId)
      await this.#o.runtime.stopAgent(workspaceId)
    }).catch((err: unknown) => this.#o.logger?.error({ err, workspace_id: workspaceId }, 'letting go of a lost workspace failed'))
  }

  /** Waits (bounded) until another replica moved the workspace to one of `states`. */
  async #awaitState(orgId: string, workspaceId: string, states: readonly string[]): Promise<WorkspaceRecord> {
    const deadline = Date.now() + (this.#o.remoteWaitMs ?? 120_000)
    for (;;) {
      const ws = await this.#records.mustGet(orgId, workspaceId)
      if (states.includes(ws.state)) return ws
      if (Date.now() > deadline) throw apiError('service_unavailable', `workspace ${workspaceId} is ${ws.state}; the replica that runs it has not finished yet; retry`)
      await new Promise((r) => setTimeout(r, 100))
    }
  }

  fillPools(): Promise<void> {
    return this.#pools.fill()
  }

  /** The number of unclaimed members a pooled role should have now (docs/workspaces.md). */
  poolTarget(role: PoolRole): number {
    return this.#pools.target(role)
  }

  // ---- reads (the routes' data) -------------------------------------------------------------

  get(orgId: string, id: string): Promise<WorkspaceRecord | undefined> {
    return this.#t.get(orgId, id)
  }

  list(orgId: string, filter: WorkspaceFilter = {}): Promise<WorkspaceRecord[]> {
    return this.#t.list(orgId, filter)
  }

  task(orgId: string, id: string): Promise<TaskRecord | undefined> {
    return this.#t.tasks.get(orgId, id)
  }

  tasks(orgId: string, workspaceId: string): Promise<TaskRecord[]> {
    return this.#t.tasks.forWorkspace(orgId, workspaceId)
  }

  /** Whether a task row exists (any org): a refused create leaves none, and its staged files go. */
  async taskExists(id: string): Promise<boolean> {
    return (await this.#t.tasks.byId(id)) !== undefined
  }

  role(orgId: string, ref: { id?: string; name?: string }): Promise<RoleConfig | undefined> {
    return this.#t.role(orgId, ref)
  }

  // ---- API operations ---------------------------------------------------------------------

  /** POST /v1/tasks and POST /v1/workspaces: a new workspace (and its first task, atomically). */
  async createWorkspace(orgId: string, actor: Actor, role: RoleConfig, first?: TaskInput): Promise<{ workspace: WorkspaceRecord; task?: TaskRecord }> {
    const out = await this.#records.mutate(async (tx, record) => {
      const t = tx.workspaces
      const env = first?.options.environment
      const owner = { created_by: actor.creatorId, created_by_user_id: actor.userId, ...(env ? { environment: env } : {}) }
      // A warm pool member of the role, when one is ready, skips provisioning.
      const claimed = await t.claimPooled(orgId, role.id, owner)
      const id = claimed ?? (await t.create(orgId, { role_id: role.id, ...owner }))
      const task = first ? await t.tasks.create(orgId, { ...first, workspace_id: id, created_by: actor.creatorId }) : undefined
      const workspace = (await t.get(orgId, id))!
      // A claimed pool member had its workspace_created (user `system`) when the pool made it.
      if (claimed === undefined) record(workspace, 'workspace_created', actor.userId, { forked: false })
      if (task) record(workspace, 'task_submitted', actor.userId, { description: task.description }, task.id)
      return { workspace, task, claimed: claimed !== undefined }
    })
    // The token's answer is relayed to the agent by the bridge in this process: one I/O pass lets
    // it through now rather than after the rest of the claim's store work (SQLite calls are
    // synchronous, so the chain up to the task's hand-over would not yield to I/O).
    if (out.claimed && out.task && (await this.#handOver.handTokenAhead(out.workspace, out.task, this.#runner.timeoutSeconds(role) + 300))) await ioPass()
    // The cluster's copy of the claim (a Kubernetes member's claim and pods relabelled `claimed`),
    // before the kick below may start a cold member's agent pod (docs/kubernetes.md "Runtime: warm pools and packs").
    if (out.claimed && this.#o.runtime.capabilities.warmClaims) await this.#claimWarm(out.workspace.id, out.task?.id ?? `creator:${actor.creatorId}`)
    void this.kick(out.workspace.id)
    // Every create of a dynamic role counts, also with pool_size 0: such a pool grows from zero.
    if (role.pool_policy === 'dynamic') await this.#pools.noteDemand(orgId, role.id, out.claimed)
    if (out.claimed || role.pool_policy === 'dynamic') this.#pools.fillSoon()
    return { workspace: out.workspace, ...(out.task ? { task: out.task } : {}) }
  }

  /** The driver's claim of a member the database gave this create; the database stays the authority. */
  async #claimWarm(workspaceId: string, claimant: string): Promise<void> {
    try {
      if (!(await this.#o.runtime.capabilities.warmClaims?.claimWarm(workspaceId, claimant))) this.#o.logger?.warn({ workspaceId, claimant }, 'warm pool member claimed in the database but held by another claimant in the runtime')
    } catch (err) {
      this.#o.logger?.warn({ err, workspaceId }, 'marking the warm pool member claimed in the runtime failed')
    }
  }

  /** POST /v1/workspaces/{id}/tasks. */
  async submitTask(orgId: string, actor: Actor, workspaceId: string, input: TaskInput): Promise<TaskRecord> {
    const task = await this.#locks.run(workspaceId, async () => {
      const ws = await this.#records.mustGet(orgId, workspaceId)
      if (ws.state === 'archived' || ws.desired_state === 'archived') throw apiError('workspace_archived', `workspace ${ws.id} is archived; unarchive it first`)
      if (ws.state === 'provisioning' || ws.state === 'stopping') throw apiError('workspace_not_ready', `workspace ${ws.id} is ${ws.state}; retry when it is idle`)
      if (ws.pooled) throw apiError('workspace_not_ready', `workspace ${ws.id} is an unclaimed warm-pool workspace; POST /v1/tasks with its role claims one`)
      const active = await this.#t.tasks.active(ws.id)
      if (active || ws.state === 'busy') {
        throw apiError('task_already_running', `${active ? `task ${active.id}` : 'a task'} is active on workspace ${ws.id}; cancel it first`, active ? { task_id: active.id } : undefined)
      }
      return this.#records.mutate(async (tx, record) => {
        const created = await tx.workspaces.tasks.create(orgId, { ...input, workspace_id: ws.id, created_by: actor.creatorId })
        // A stopped workspace restarts for the task: provisioning re-adopts its /data.
        if (ws.state === 'stopped') {
          await tx.workspaces.transition(ws.id, ['stopped'], 'provisioning', { desired_state: 'running', desired_by: null })
        }
        record(ws, 'task_submitted', actor.userId, { description: created.description }, created.id)
        return created
      })
    })
    void this.kick(workspaceId)
    return task
  }

  /** POST /v1/tasks/{id}/cancel: a queued task ends at once; a running one also stops its agent. */
  async cancelTask(orgId: string, taskId: string): Promise<TaskRecord> {
    const task = await this.#t.tasks.get(orgId, taskId)
    if (!task) throw apiError('not_found', `task ${taskId} not found`)
    await this.#locks.run(task.workspace_id, async () => {
      const ws = (await this.#t.byId(task.workspace_id))!
      if (await this.#records.finishTask(ws, taskId, 'cancelled', 'cancelled_by_user')) await this.#runner.stopIfRunning(ws.id, taskId)
    })
    // Its agent may run on another replica: the owner's reconcile stops it.
    void this.kick(task.workspace_id)
    return (await this.#t.tasks.get(orgId, taskId))!
  }

  /** POST /v1/workspaces/{id}/stop: snapshot and tear down; resolves when stopped. */
  async stop(orgId: string, workspaceId: string, actorUserId?: string): Promise<WorkspaceRecord> {
    const here = await this.#locks.run(workspaceId, async () => {
      const found = await this.#records.mustGet(orgId, workspaceId)
      if (found.state === 'stopped' || found.state === 'archived') throw apiError('workspace_already_stopped', `workspace ${found.id} is already ${found.state}`)
      await this.#t.update(found.id, { desired_state: 'stopped', desired_by: actorUserId ?? null })
      const ws = await this.#reconciler.own(found)
      if (!ws) return undefined
      if (ws.state !== 'stopped') await this.#reconciler.stopNow(ws, actorUserId)
      return (await this.#t.byId(ws.id))!
    })
    if (here) return here
    // Another replica runs it: the stop is written; its owner snapshots and stops it.
    await this.#ownership.nudge(workspaceId)
    return this.#awaitState(orgId, workspaceId, ['stopped', 'archived'])
  }

  async archive(orgId: string, workspaceId: string, actorUserId: string): Promise<WorkspaceRecord> {
    const here = await this.#locks.run(workspaceId, async () => {
      const found = await this.#records.mustGet(orgId, workspaceId)
      if (found.state === 'archived') return found
      await this.#t.update(found.id, { desired_state: 'archived', desired_by: actorUserId })
      const ws = await this.#reconciler.own(found)
      if (!ws) return undefined
      if (ws.state !== 'stopped') await this.#reconciler.stopNow(ws, actorUserId)
      await this.#reconciler.archived(ws, actorUserId)
      return (await this.#t.byId(ws.id))!
    })
    if (here) return here
    await this.#ownership.nudge(workspaceId)
    return this.#awaitState(orgId, workspaceId, ['archived'])
  }

  /** Unarchive lands in `stopped` (the spec leaves it open; docs/workspaces.md): a task restarts it. */
  async unarchive(orgId: string, workspaceId: string, actorUserId: string): Promise<WorkspaceRecord> {
    return this.#locks.run(workspaceId, async () => {
      const ws = await this.#records.mustGet(orgId, workspaceId)
      if (ws.state !== 'archived') throw apiError('not_archived', `workspace ${ws.id} is not archived`)
      await this.#records.mutate(async (tx, record) => {
        await tx.workspaces.update(ws.id, { state: 'stopped', desired_state: 'stopped', archived_at: null })
        record(ws, 'workspace_unarchived', actorUserId)
      })
      return (await this.#t.byId(ws.id))!
    })
  }

  /** POST /v1/workspaces/{id}/fork: a child restored from the parent's snapshot after `forkPoint` tasks. */
  async fork(orgId: string, actor: Actor, parentId: string, forkPoint: number, role: RoleConfig): Promise<WorkspaceRecord> {
    const child = await this.#locks.run(parentId, async () => {
      const parent = await this.#records.mustGet(orgId, parentId)
      if (!['idle', 'stopped'].includes(parent.state)) {
        throw apiError('invalid_state', `workspace ${parent.id} is ${parent.state}; fork an idle or stopped workspace`, { state: parent.state })
      }
      if (forkPoint > parent.task_count) {
        throw apiError('validation_error', `fork_point_task_count ${forkPoint} is beyond the ${parent.task_count} tasks workspace ${parent.id} has run`, { fields: { fork_point_task_count: `must be at most ${parent.task_count}` } })
      }
      const snap = forkPoint === 0 ? null : await this.#o.runtime.snapshotAt(parent.id, forkPoint)
      if (forkPoint > 0 && !snap) {
        throw apiError('validation_error', `workspace ${parent.id} has no snapshot after ${forkPoint} tasks`, { fields: { fork_point_task_count: 'no snapshot at this point' } })
      }
      return this.#records.mutate(async (tx, record) => {
        const id = await tx.workspaces.create(orgId, {
          role_id: role.id, created_by: actor.creatorId, created_by_user_id: actor.userId, parent_workspace_id: parent.id,
          fork_point_task_count: forkPoint, ...(snap ? { fork_source_snapshot_ref: snap.ref } : {}),
        })
        const created = (await tx.workspaces.byId(id))!
        const ref = snap?.ref ?? ''
        record(parent, 'workspace_forked', actor.userId, { resource_id: parent.id, child_workspace_id: id, fork_point_task_count: forkPoint, fork_source_snapshot_ref: ref })
        record(created, 'workspace_fork_created', actor.userId, { resource_id: id, parent_workspace_id: parent.id, fork_point_task_count: forkPoint, fork_source_snapshot_ref: ref })
        record(created, 'workspace_created', actor.userId, { forked: true, parent_workspace_id: parent.id, fork_point_task_count: forkPoint, fork_source_snapshot_ref: ref })
        return created
      })
    })
    void this.kick(child.id)
    return child
  }

  async snapshotFiles(orgId: string, workspaceId: string): Promise<SnapshotFileEntry[]> {
    const ws = await this.#records.mustGet(orgId, workspaceId)
    const snaps = await this.#o.runtime.snapshots(ws.id).catch(() => [])
    if (snaps.length === 0) throw apiError('not_found', `workspace ${ws.id} has no snapshot yet`)
    return this.#o.runtime.listSnapshotFiles(ws.id)
  }

  /**
   * One path of the latest snapshot, or of the one a fork at `taskCount` would restore
   * (runtime.readSnapshot, src/runtime/snapshot-content.ts); not found without such a snapshot.
   */
  async snapshotContent(orgId: string, workspaceId: string, path: string, taskCount?: number): Promise<SnapshotContent> {
    const ws = await this.#records.mustGet(orgId, workspaceId)
    const read = this.#o.runtime.readSnapshot.bind(this.#o.runtime)
    if (taskCount === undefined) return read(ws.id, path)
    const snap = await this.#o.runtime.snapshotAt(ws.id, taskCount)
    if (!snap) throw apiError('not_found', `workspace ${ws.id} has no snapshot after ${taskCount} tasks`)
    return read(ws.id, path, snap.ref)
  }

  // ---- the agent callbacks' target (agent-callbacks.ts) -----------------------------------

  /** `GET /tasks/next` from a workspace's agent (hand-over.ts). */
  nextTask(workspaceId: string, waitMs?: number, opts: { tokenAhead?: boolean; as?: PollToken } = {}): Promise<AgentTask | TokenAhead | 'wait' | 'none'> {
    return this.#handOver.nextTask(workspaceId, waitMs, opts)
  }

  /** The agent reported `task_end`. First writer wins. */
  async agentTaskEnded(workspaceId: string, taskId: string, status: TaskOutcomeStatus, reason?: string, summary?: string): Promise<void> {
    await this.#locks.run(workspaceId, async () => {
      const ws = await this.#t.byId(workspaceId)
      if (ws) await this.#runner.agentEnded(ws, taskId, status, reason, summary)
    })
  }

  /** The pack schemas a workspace's agent events must also satisfy (launcher.ts). */
  agentEventSchemas(orgId: string, workspaceId: string): Promise<readonly PackEventValidators[]> {
    return this.#launcher.eventSchemas(orgId, workspaceId)
  }

  /** Whether a task's /data is being measured against the disk quota now (diagnostics, tests). */
  watchingDisk(workspaceId: string): boolean {
    return this.#runner.watchingDisk(workspaceId)
  }

  // ---- the role and provider routes' seam (server/workspace-control.ts) --------------------

  activeCount(orgId: string, roleIds: readonly string[]): Promise<number> {
    return this.#t.activeCountForRoles(orgId, roleIds)
  }

  /** Stops the workspaces in use (the same set activeCount counts); unclaimed pool members stay with
   * the pool, which restarts them on role changes and retires them on archive. */
  async stopForRole(orgId: string, roleId: string): Promise<number> {
    const ids = await this.#t.idsForRole(orgId, roleId, ['provisioning', 'idle', 'busy'], { pooled: false })
    for (const id of ids) {
      await this.#t.update(id, { desired_state: 'stopped', desired_by: null })
      void this.kick(id)
    }
    return ids.length
  }

  /** Agents start per task and read the role at each start, so an idle workspace picks the change
   * up with its next task; the restart is recorded (`workspace_restarted`) for each. */
  async restartIdleForRole(orgId: string, roleId: string): Promise<number> {
    const ids = await this.#t.idsForRole(orgId, roleId, ['idle'])
    for (const id of ids) {
      const ws = await this.#t.byId(id)
      if (ws) await this.#records.emit(ws, 'workspace_restarted', ws.created_by_user_id)
      // A warm agent read the old role at its start: start it again with the new one.
      if (this.#handOver.has(id) || this.#handOver.uncold(id)) await this.#locks.run(id, () => this.#handOver.restart(id))
    }
    return ids.length
  }
}

/** The keys of `o` that are set, for optional options passed on (exactOptionalPropertyTypes). */
function pick<T extends object, K extends keyof T>(o: T, ...keys: K[]): { [P in K]?: NonNullable<T[P]> } {
  const out: Partial<Record<K, unknown>> = {}
  for (const k of keys) if (o[k] !== undefined) out[k] = o[k]
  return out as { [P in K]?: NonNullable<T[P]> }
}
