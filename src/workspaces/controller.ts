// The workspace controller: the control plane's half of a workspace. The store holds the actual
// state (`state`) and what the API asked for (`desired_state`); the controller moves one toward the
// other and drives the WorkspaceRuntime, which only does what it is told (docs/runtime.md).
//
// Everything that changes one workspace runs under that workspace's lock, in order. A reconcile
// visits every unsettled workspace at start and on a timer, so a crash of `serve` in the middle of
// a provision, a task or a stop leaves nothing stuck (docs/workspaces.md "Crash safety").
//
// One agent process per task: the task is handed over in `$CORRAL_INBOX/tasks.json`, the agent
// reports through the proxy (agent-events.ts), ends with `task_end` and exits; the controller then
// snapshots /data and the workspace is idle again. The conversation survives in /data/.corral.
// A warm pool member runs its agent ahead of time instead, long-polling `GET /tasks/next`
// (nextTask); a claim hands the task (with its own token) to that waiting process.
import { rm } from 'node:fs/promises'
import { join } from 'node:path'
import type { Logger } from 'pino'
import { SYSTEM_USER, type AuditSink, type EventType, type NewAuditEvent, apiError } from '../contract/index.js'
import { WORKSPACE_STOPPED_CHANNEL } from '../proxy/serve-service.js'
import { TASK_ENDED_CHANNEL, type CapabilityTokens } from '../proxy/index.js'
import type { WorkspaceControl } from '../server/workspace-control.js'
import type { RoleConfig, Store, TaskOptions, TaskRecord, WorkspaceRecord, WorkspacesRepository } from '../store/index.js'
import type { AgentExit, AgentLaunch, AgentProcess, LimitHit, SnapshotFileEntry, WorkspaceRuntime } from '../runtime/index.js'
import type { AgentTask } from '../agent/task.js'
import { agentEnv, agentProgram, agentTask } from './agent-launch.js'
import type { PackEventValidators } from './agent-event-schemas.js'
import { resolveWorkspacePacks, type PackSource, type WorkspacePacks } from './packs.js'
import { DiskWatch, diskOverText, quotaBytes, type DiskUsage } from './disk-watch.js'

export const DEFAULT_TASK_TIMEOUT_SECONDS = 3600
/** How long `GET /tasks/next` is held for a warm agent before a 204 (it asks again at once). */
export const TASK_LONG_POLL_MS = 20_000
/** Lifetime of a warm agent's workspace token (it only fetches its task; the task brings its own). */
const WARM_TOKEN_TTL_S = 24 * 3600
/**
 * A pool refill asked for by a task's create starts this much later, so bringing up the new member
 * (provisioning, a sandbox and its agent starting) does not compete for CPU with the claimed
 * member's hand-over or the new workspace's start (docs/runtime.md "Benchmark").
 */
const REFILL_AFTER_CREATE_MS = 500
/** A warm agent that lived at least this long before exiting unclaimed is started again. */
const WARM_RESTART_AFTER_MS = 60_000
/** A `dynamic` pool's pressure raises its target for this long (docs/workspaces.md "Dynamic pools"). */
export const DEFAULT_POOL_DEMAND_WINDOW_MS = 5 * 60_000
/** Surplus members of a `dynamic` pool idle this long are stopped, when the role has no idle_timeout_seconds. */
export const DEFAULT_POOL_IDLE_SECONDS = 600
/** How often /data is measured against the disk quota while a task runs (docs/runtime.md "Resource limits"). */
export const DEFAULT_DISK_CHECK_INTERVAL_MS = 2_000

/** The summary of a task whose agent died at a workspace limit (docs/runtime.md "Resource limits"). */
const LIMIT_HIT_TEXT: Record<LimitHit, string> = {
  memory: 'The workspace reached its memory limit (CORRAL_WORKSPACE_MEMORY_MB, all its processes and /tmp together): the kernel killed a process of it.',
  pids: 'The workspace reached its process limit (CORRAL_WORKSPACE_PIDS): a process of it could not be started.',
}

/** Who acts: `userId` attributes audit rows, `creatorId` is the `:own` identity (key id for API keys). */
export interface Actor {
  userId: string
  creatorId: string
}

export interface TaskInput {
  id?: string
  description: string
  options: TaskOptions
  metadata?: Record<string, unknown>
  /** File names already written to `stagingDir(task id)`. */
  uploads?: string[]
}

export interface ControllerOptions {
  store: Store
  audit: AuditSink
  runtime: WorkspaceRuntime
  tokens: CapabilityTokens
  /** argv of the agent inside the workspace (defaultAgentCommand()) when no attached pack provides one. */
  agentCommand: readonly string[]
  /** The packs attached to roles (store.packs + the content store); without it no packs are mounted. */
  packs?: PackSource
  /** Where uploads wait until the workspace's /data exists. */
  stagingRoot: string
  logger?: Logger
  /** Extra environment for every agent (e.g. CORRAL_EVENTS_URL, CORRAL_MAX_ITERATIONS). */
  agentEnv?: Record<string, string>
  reconcileIntervalMs?: number
  defaultTaskTimeoutSeconds?: number
  /** Start the agent of a warm pool member ahead of its task (default true; docs/workspaces.md). */
  warmAgents?: boolean
  /** The clock of the dynamic pool rule (demand window, idle age); tests move it instead of sleeping. */
  now?: () => number
  /** How long a pool-pressure event raises a `dynamic` pool's target (default 5 min). */
  poolDemandWindowMs?: number
  /** /data's disk quota in MiB (limitsFromEnv().diskMb), checked on the host while a task runs; 0 or unset = none. */
  diskQuotaMb?: number
  /** Pause between two measurements of /data while a task runs (default 2 s). */
  diskCheckIntervalMs?: number
}

/** Resolves after the event loop's next I/O (poll) phase: two check phases apart. */
const ioPass = (): Promise<void> => new Promise((resolve) => setImmediate(() => setImmediate(resolve)))

/** `GET /tasks/next?token=ahead` answer before the task: the agent switches to this token and asks again. */
export interface TokenAhead {
  proxy_token: string
}

/** The token a task poll came with: a start-up token (its id) or a task token (its task). */
export type PollToken = { startup: true; jti?: string } | { startup?: false; taskId?: string }

/** The agent of an unclaimed pool member, waiting in `GET /tasks/next` for its task. */
interface WarmAgent {
  process: AgentProcess
  startedAt: number
  /** Id of the agent's start-up token; spent once it fetched the first task (or its token ahead). */
  startupJti: string
  startupSpent?: boolean
  /** Set by the claim; delivered once by nextTask. */
  pending?: AgentTask
  /**
   * The claimed task's capability token, minted at the claim and handed to an agent that asks
   * for it (`GET /tasks/next?token=ahead`) before the task itself: the agent opens its tunnel
   * with the task's token while the task is being started, instead of after.
   */
  ahead?: { taskId: string; token: string; sent: boolean }
  /** The current long poll asked for the token ahead (only such a poll is woken for it). */
  pollTakesToken?: boolean
  /** Ends the current long poll early (a task arrived, or the agent must go). */
  wake?: () => void
}

interface RunningTask {
  taskId: string
  process: AgentProcess
  timer?: NodeJS.Timeout
  /** Measures /data against the disk quota while the agent runs (none without a quota). */
  disk?: DiskWatch
}

export class WorkspaceController implements WorkspaceControl {
  readonly #o: ControllerOptions
  readonly #t: WorkspacesRepository
  readonly #locks = new Map<string, Promise<unknown>>()
  readonly #running = new Map<string, RunningTask>()
  readonly #idleTimers = new Map<string, NodeJS.Timeout>()
  readonly #warm = new Map<string, WarmAgent>()
  /** Warm-ups whose agent may already run but is not in #warm yet (settled once it is, or failed). */
  readonly #warming = new Map<string, Promise<void>>()
  /** The packs each workspace's current agent was started with (its event schemas). */
  readonly #launchPacks = new Map<string, WorkspacePacks>()
  /** Pool members whose warm agent exited fast: claims start their agent cold. */
  readonly #coldMembers = new Set<string>()
  /** Per `dynamic` role: when claims found its pool empty or drained it (clock ms, newest last). */
  readonly #poolPressure = new Map<string, number[]>()
  /** Host path of each provisioned workspace's /data (from the runtime's handles), for the disk watch. */
  readonly #dataDirs = new Map<string, string>()
  /** /data's size at the last measurement of a task's end, per workspace (the next task's disk baseline). */
  readonly #diskSeen = new Map<string, number>()
  #interval: NodeJS.Timeout | undefined
  #closed = false
  #fill: Promise<void> | undefined
  #fillAgain = false
  #fillTimer: NodeJS.Timeout | undefined

  constructor(opts: ControllerOptions) {
    this.#o = opts
    this.#t = opts.store.workspaces
  }

  get tables() {
    return this.#t
  }

  stagingDir(taskId: string): string {
    return join(this.#o.stagingRoot, taskId)
  }

  /** Reconciles everything once (crash recovery), then keeps a slow loop running as a safety net. */
  async start(): Promise<void> {
    await this.reconcileAll()
    this.#interval = setInterval(() => void this.reconcileAll(), this.#o.reconcileIntervalMs ?? 5_000)
    this.#interval.unref()
  }

  async close(): Promise<void> {
    this.#closed = true
    if (this.#interval) clearInterval(this.#interval)
    if (this.#fillTimer) clearTimeout(this.#fillTimer)
    for (const t of this.#idleTimers.values()) clearTimeout(t)
    for (const r of this.#running.values()) {
      if (r.timer) clearTimeout(r.timer)
      r.disk?.stop()
    }
    for (const w of this.#warm.values()) w.wake?.()
    // Agents die with serve; their tasks are failed by the next start's reconcile.
    await Promise.allSettled([...this.#locks.values()])
  }

  async reconcileAll(): Promise<void> {
    if (this.#closed) return
    const ids = await this.#t.unsettled().catch((err: unknown) => {
      this.#o.logger?.error({ err }, 'reconcile scan failed')
      return [] as string[]
    })
    await Promise.all(ids.map((id) => this.kick(id)))
    await this.fillPools()
  }

  /** Schedules a reconcile of one workspace; resolves when it ran. */
  kick(workspaceId: string): Promise<void> {
    return this.#withLock(workspaceId, () => this.#reconcile(workspaceId)).catch((err: unknown) => {
      this.#o.logger?.error({ err, workspace_id: workspaceId }, 'workspace reconcile failed')
    })
  }

  // ---- API operations ---------------------------------------------------------------------

  /** POST /v1/tasks and POST /v1/workspaces: a new workspace (and its first task, atomically). */
  async createWorkspace(orgId: string, actor: Actor, role: RoleConfig, first?: TaskInput): Promise<{ workspace: WorkspaceRecord; task?: TaskRecord }> {
    const out = await this.#o.store.transaction(async (tx) => {
      const t = tx.workspaces
      const env = first?.options.environment
      const owner = { created_by: actor.creatorId, created_by_user_id: actor.userId, ...(env ? { environment: env } : {}) }
      // A warm pool member of the role, when one is ready, skips provisioning.
      const claimed = await t.claimPooled(orgId, role.id, owner)
      const id = claimed ?? (await t.create(orgId, { role_id: role.id, ...owner }))
      const task = first ? await t.tasks.create(orgId, { ...first, workspace_id: id, created_by: actor.creatorId }) : undefined
      return { workspace: (await t.get(orgId, id))!, task, claimed: claimed !== undefined }
    })
    // The token's answer is relayed to the agent by the bridge in this process: one I/O pass lets
    // it through now rather than after the rest of the claim's store work (SQLite calls are
    // synchronous, so the chain up to the task's hand-over would not yield to I/O).
    if (out.claimed && out.task && (await this.#handTokenAhead(out.workspace, out.task, role))) await ioPass()
    // A claimed pool member had its workspace_created (user `system`) when the pool made it.
    if (!out.claimed) await this.#emit(out.workspace, 'workspace_created', actor.userId, { forked: false })
    if (out.task) await this.#emit(out.workspace, 'task_submitted', actor.userId, { description: out.task.description }, out.task.id)
    void this.kick(out.workspace.id)
    // Every create of a dynamic role counts, also with pool_size 0: such a pool grows from zero.
    if (role.pool_policy === 'dynamic') await this.#notePoolDemand(orgId, role.id, out.claimed)
    if (out.claimed || role.pool_policy === 'dynamic') this.#fillSoon()
    return { workspace: out.workspace, ...(out.task ? { task: out.task } : {}) }
  }

  /**
   * Keeps each pooled role's warm pool at its target of unclaimed workspaces (provisioning or
   * idle): `pool_size` for `static`; for `dynamic`, poolTarget() with surplus members retired once
   * idle long enough (docs/workspaces.md "Dynamic pools"). One pass at a time: a call during a
   * pass asks for another one and resolves when it ran, so the ceiling holds against concurrent
   * fills and an awaited call always sees a full pass.
   */
  fillPools(): Promise<void> {
    if (this.#closed) return Promise.resolve()
    if (this.#fill) {
      this.#fillAgain = true
      return this.#fill
    }
    const run = async (): Promise<void> => {
      try {
        do {
          this.#fillAgain = false
          await this.#fillOnce().catch((err: unknown) => this.#o.logger?.error({ err }, 'warm pool fill failed'))
        } while (this.#fillAgain && !this.#closed)
      } finally {
        this.#fill = undefined
      }
    }
    this.#fill = run()
    return this.#fill
  }

  /** One fillPools() after REFILL_AFTER_CREATE_MS; creates in between share it. */
  #fillSoon(): void {
    if (this.#fillTimer || this.#closed) return
    this.#fillTimer = setTimeout(() => {
      this.#fillTimer = undefined
      void this.fillPools()
    }, REFILL_AFTER_CREATE_MS)
    this.#fillTimer.unref()
  }

  /** The number of unclaimed members a pooled role should have now (docs/workspaces.md). */
  poolTarget(role: { id: string; pool_policy: string | null; pool_size?: number | null; pool_max_size?: number | null }): number {
    const size = role.pool_size ?? 0
    if (role.pool_policy !== 'dynamic') return size
    const ceiling = Math.max(size, role.pool_max_size ?? size)
    return Math.min(ceiling, size + this.#recentPressure(role.id))
  }

  async #fillOnce(): Promise<void> {
    for (const pool of await this.#t.pooledRoles()) {
      if (this.#closed) return
      const role = await this.#o.store.agentRoles.get(pool.org_id, pool.role_id)
      const target = role ? this.poolTarget(role) : pool.pool_size
      const have = await this.#t.poolCount(pool.role_id)
      if (role?.pool_policy === 'dynamic' && have > target) await this.#shrinkPool(pool.org_id, pool.role_id, have - target, role.idle_timeout_seconds)
      for (let i = have; i < target; i++) {
        const id = await this.#t.create(pool.org_id, { role_id: pool.role_id, created_by: SYSTEM_USER, created_by_user_id: SYSTEM_USER, pooled: true })
        const ws = (await this.#t.byId(id))!
        await this.#emit(ws, 'workspace_created', SYSTEM_USER, { forked: false, pooled: true })
        void this.kick(id)
      }
      // Idle members without a waiting agent (a restarted serve): warm them. Members whose
      // agent failed fast stay cold.
      if (this.#o.warmAgents === false) continue
      for (const w of await this.#t.list(pool.org_id, { state: ['idle'], role: pool.role_id })) {
        if (w.pooled && !this.#warm.has(w.id) && !this.#coldMembers.has(w.id)) void this.kick(w.id)
      }
    }
  }

  /**
   * Retires up to `surplus` unclaimed members of a `dynamic` pool that have been idle for the
   * role's idle_timeout_seconds (default DEFAULT_POOL_IDLE_SECONDS), oldest first. A member is
   * taken out of the pool with the same guarded claim a task uses, so a concurrent task claim
   * never gets a workspace that is being stopped.
   */
  async #shrinkPool(orgId: string, roleId: string, surplus: number, idleTimeoutS: number | undefined): Promise<void> {
    const idleMs = (idleTimeoutS && idleTimeoutS > 0 ? idleTimeoutS : DEFAULT_POOL_IDLE_SECONDS) * 1000
    const now = this.#now()
    for (let i = 0; i < surplus; i++) {
      // claimPooled takes the oldest idle member: retire only when that one has idled long enough.
      const idle = (await this.#t.list(orgId, { state: ['idle'], role: roleId })).filter((w) => w.pooled)
      idle.sort((a, b) => a.created_at.localeCompare(b.created_at) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      const oldest = idle[0]
      if (!oldest || now - Date.parse(oldest.updated_at) < idleMs) return
      const id = await this.#t.claimPooled(orgId, roleId, { created_by: SYSTEM_USER, created_by_user_id: SYSTEM_USER })
      if (!id) return
      await this.#withLock(id, async () => {
        await this.#t.update(id, { desired_state: 'stopped' })
        const ws = await this.#t.byId(id)
        if (ws) await this.#stopNow(ws)
      })
    }
  }

  /** Records one claim of a `dynamic` role: pressure when it found no ready member or left none. */
  async #notePoolDemand(orgId: string, roleId: string, claimed: boolean): Promise<void> {
    const ready = claimed ? (await this.#t.list(orgId, { state: ['idle'], role: roleId })).some((w) => w.pooled) : false
    if (claimed && ready) return
    const list = this.#poolPressure.get(roleId) ?? []
    list.push(this.#now())
    this.#poolPressure.set(roleId, list)
  }

  /** Pressure events of a role inside the demand window (older ones are forgotten). */
  #recentPressure(roleId: string): number {
    const list = this.#poolPressure.get(roleId)
    if (!list) return 0
    const since = this.#now() - (this.#o.poolDemandWindowMs ?? DEFAULT_POOL_DEMAND_WINDOW_MS)
    const kept = list.filter((t) => t > since)
    if (kept.length) this.#poolPressure.set(roleId, kept)
    else this.#poolPressure.delete(roleId)
    return kept.length
  }

  #now(): number {
    return this.#o.now ? this.#o.now() : Date.now()
  }

  /** POST /v1/workspaces/{id}/tasks. */
  async submitTask(orgId: string, actor: Actor, workspaceId: string, input: TaskInput): Promise<TaskRecord> {
    const task = await this.#withLock(workspaceId, async () => {
      const ws = await this.#mustGet(orgId, workspaceId)
      if (ws.state === 'archived' || ws.desired_state === 'archived') throw apiError('workspace_archived', `workspace ${ws.id} is archived; unarchive it first`)
      if (ws.state === 'provisioning' || ws.state === 'stopping') throw apiError('workspace_not_ready', `workspace ${ws.id} is ${ws.state}; retry when it is idle`)
      if (ws.pooled) throw apiError('workspace_not_ready', `workspace ${ws.id} is an unclaimed warm-pool workspace; POST /v1/tasks with its role claims one`)
      const active = await this.#t.tasks.active(ws.id)
      if (active || ws.state === 'busy') {
        throw apiError('task_already_running', `${active ? `task ${active.id}` : 'a task'} is active on workspace ${ws.id}; cancel it first`, active ? { task_id: active.id } : undefined)
      }
      const created = await this.#t.tasks.create(orgId, { ...input, workspace_id: ws.id, created_by: actor.creatorId })
      // A stopped workspace restarts for the task: provisioning re-adopts its /data.
      if (ws.state === 'stopped') {
        await this.#t.transition(ws.id, ['stopped'], 'provisioning', { desired_state: 'running' })
      }
      await this.#emit(ws, 'task_submitted', actor.userId, { description: created.description }, created.id)
      return created
    })
    void this.kick(workspaceId)
    return task
  }

  /** POST /v1/tasks/{id}/cancel: a queued task ends at once; a running one also stops its agent. */
  async cancelTask(orgId: string, taskId: string): Promise<TaskRecord> {
    const task = await this.#t.tasks.get(orgId, taskId)
    if (!task) throw apiError('not_found', `task ${taskId} not found`)
    await this.#withLock(task.workspace_id, async () => {
      const ws = (await this.#t.byId(task.workspace_id))!
      if (await this.#finishTask(ws, taskId, 'cancelled', 'cancelled_by_user')) {
        const run = this.#running.get(ws.id)
        if (run?.taskId === taskId) await this.#o.runtime.stopAgent(ws.id)
      }
    })
    return (await this.#t.tasks.get(orgId, taskId))!
  }

  /** POST /v1/workspaces/{id}/stop: snapshot and tear down; resolves when stopped. */
  async stop(orgId: string, workspaceId: string, actorUserId?: string): Promise<WorkspaceRecord> {
    return this.#withLock(workspaceId, async () => {
      const ws = await this.#mustGet(orgId, workspaceId)
      if (ws.state === 'stopped' || ws.state === 'archived') throw apiError('workspace_already_stopped', `workspace ${ws.id} is already ${ws.state}`)
      await this.#t.update(ws.id, { desired_state: 'stopped' })
      await this.#stopNow(ws, actorUserId)
      return (await this.#t.byId(ws.id))!
    })
  }

  async archive(orgId: string, workspaceId: string, actorUserId: string): Promise<WorkspaceRecord> {
    return this.#withLock(workspaceId, async () => {
      const ws = await this.#mustGet(orgId, workspaceId)
      if (ws.state === 'archived') return ws
      await this.#t.update(ws.id, { desired_state: 'archived' })
      if (ws.state !== 'stopped') await this.#stopNow(ws, actorUserId)
      await this.#t.update(ws.id, { state: 'archived', archived_at: new Date().toISOString() })
      await this.#emit(ws, 'workspace_archived', actorUserId)
      return (await this.#t.byId(ws.id))!
    })
  }

  /** Unarchive lands in `stopped` (the spec leaves it open; docs/workspaces.md): a task restarts it. */
  async unarchive(orgId: string, workspaceId: string, actorUserId: string): Promise<WorkspaceRecord> {
    return this.#withLock(workspaceId, async () => {
      const ws = await this.#mustGet(orgId, workspaceId)
      if (ws.state !== 'archived') throw apiError('not_archived', `workspace ${ws.id} is not archived`)
      await this.#t.update(ws.id, { state: 'stopped', desired_state: 'stopped', archived_at: null })
      await this.#emit(ws, 'workspace_unarchived', actorUserId)
      return (await this.#t.byId(ws.id))!
    })
  }

  /** POST /v1/workspaces/{id}/fork: a child restored from the parent's snapshot after `forkPoint` tasks. */
  async fork(orgId: string, actor: Actor, parentId: string, forkPoint: number, role: RoleConfig): Promise<WorkspaceRecord> {
    const child = await this.#withLock(parentId, async () => {
      const parent = await this.#mustGet(orgId, parentId)
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
      const id = await this.#t.create(orgId, {
        role_id: role.id, created_by: actor.creatorId, created_by_user_id: actor.userId, parent_workspace_id: parent.id,
        fork_point_task_count: forkPoint, ...(snap ? { fork_source_snapshot_ref: snap.ref } : {}),
      })
      const created = (await this.#t.byId(id))!
      const ref = snap?.ref ?? ''
      await this.#emit(parent, 'workspace_forked', actor.userId, { resource_id: parent.id, child_workspace_id: id, fork_point_task_count: forkPoint, fork_source_snapshot_ref: ref }, undefined, 'audit')
      await this.#emit(created, 'workspace_fork_created', actor.userId, { resource_id: id, parent_workspace_id: parent.id, fork_point_task_count: forkPoint, fork_source_snapshot_ref: ref }, undefined, 'audit')
      await this.#emit(created, 'workspace_created', actor.userId, { forked: true, parent_workspace_id: parent.id, fork_point_task_count: forkPoint, fork_source_snapshot_ref: ref })
      return created
    })
    void this.kick(child.id)
    return child
  }

  async snapshotFiles(orgId: string, workspaceId: string): Promise<SnapshotFileEntry[]> {
    const ws = await this.#mustGet(orgId, workspaceId)
    const snaps = await this.#o.runtime.snapshots(ws.id).catch(() => [])
    if (snaps.length === 0) throw apiError('not_found', `workspace ${ws.id} has no snapshot yet`)
    return this.#o.runtime.listSnapshotFiles(ws.id)
  }

  /** Called by the agent callback when the agent reports `task_end`. First writer wins. */
  async agentTaskEnded(workspaceId: string, taskId: string, status: 'completed' | 'failed', reason?: string, summary?: string): Promise<void> {
    await this.#withLock(workspaceId, async () => {
      const ws = await this.#t.byId(workspaceId)
      if (!ws) return
      // A task that ends `completed` is measured first: over the quota it fails instead (the
      // agent's own summary kept after ours). A failure the agent reports keeps its reason.
      const run = this.#running.get(workspaceId)
      if (status === 'completed' && run?.taskId === taskId && (await this.#t.tasks.byId(taskId))?.status === 'running') {
        if (await this.#diskCheckAtEnd(ws, taskId, run.disk, summary)) return
        // Likewise a workspace limit hit while the task ran (a process killed or refused): the
        // agent's `completed` may not know what it lost, so the task fails for the limit.
        const hit = await run.process.limitHit?.().catch(() => undefined)
        if (hit) {
          await this.#finishTask(ws, taskId, 'failed', `${hit}_limit_exceeded`, summary ? `${LIMIT_HIT_TEXT[hit]} The agent reported: ${summary}` : LIMIT_HIT_TEXT[hit])
          return
        }
      }
      await this.#finishTask(ws, taskId, status, reason, summary)
    })
  }

  // ---- WorkspaceControl (role/provider routes) --------------------------------------------

  activeCount(orgId: string, roleIds: readonly string[]): Promise<number> {
    return this.#t.activeCountForRoles(orgId, roleIds)
  }

  /** Stops the workspaces in use (the same set activeCount counts); unclaimed pool members stay with
   * the pool, which restarts them on role changes and retires them on archive. */
  async stopForRole(orgId: string, roleId: string): Promise<number> {
    const ids = await this.#t.idsForRole(orgId, roleId, ['provisioning', 'idle', 'busy'], { pooled: false })
    let n = 0
    for (const id of ids) {
      await this.#t.update(id, { desired_state: 'stopped' })
      n++
      void this.kick(id)
    }
    return n
  }

  /** Agents start per task and read the role at each start, so an idle workspace picks the change
   * up with its next task; the restart is recorded (`workspace_restarted`) for each. */
  async restartIdleForRole(orgId: string, roleId: string): Promise<number> {
    const ids = await this.#t.idsForRole(orgId, roleId, ['idle'])
    for (const id of ids) {
      const ws = await this.#t.byId(id)
      if (ws) await this.#emit(ws, 'workspace_restarted', ws.created_by_user_id)
      // A warm agent read the old role at its start: start it again with the new one.
      if (this.#warm.has(id) || this.#coldMembers.delete(id)) {
        await this.#withLock(id, async () => {
          const w = this.#warm.get(id)
          if (w?.pending) return
          if (w) {
            this.#dropWarm(id)
            await this.#o.runtime.stopAgent(id)
          }
          const now = await this.#t.byId(id)
          if (now?.state === 'idle' && now.pooled) await this.#warmUp(now)
        })
      }
    }
    return ids.length
  }

  // ---- the reconcile step ------------------------------------------------------------------

  async #reconcile(id: string): Promise<void> {
    if (this.#closed) return
    let ws = await this.#t.byId(id)
    if (!ws) return
    if (ws.state === 'provisioning') {
      if (ws.desired_state !== 'running') {
        await this.#stopNow(ws)
        return
      }
      if (!(await this.#provision(ws))) return
      ws = (await this.#t.byId(id))!
    }
    if ((ws.state === 'idle' || ws.state === 'busy') && ws.desired_state !== 'running') {
      await this.#stopNow(ws)
      if (ws.desired_state === 'archived') {
        await this.#t.update(ws.id, { state: 'archived', archived_at: new Date().toISOString() })
        await this.#emit(ws, 'workspace_archived', ws.created_by_user_id)
      }
      return
    }
    if (ws.state === 'busy' && !this.#running.has(ws.id)) {
      // The agent of this task died with a previous serve: fail the task cleanly, keep the workspace.
      for (const t of await this.#t.tasks.running(ws.id)) await this.#finishTask(ws, t.id, 'failed', 'interrupted')
      await this.#t.transition(ws.id, ['busy'], 'idle')
      ws = (await this.#t.byId(id))!
    }
    if (ws.state === 'stopping') {
      await this.#stopNow(ws)
      return
    }
    if (ws.state !== 'idle') return
    const next = await this.#t.tasks.nextSubmitted(ws.id)
    if (next) {
      this.#clearIdle(ws.id)
      await this.#startTask(ws, next)
    } else {
      await this.#armIdle(ws)
      if (ws.pooled) await this.#warmUp(ws)
    }
  }

  /**
   * `GET /tasks/next` from a workspace's agent: its task when one was handed over, else (for a
   * warm agent still unclaimed) held up to `waitMs` and then 'wait'; 'none' when the workspace has
   * no more work for this agent (a task agent asking after its task, or a warm agent being stopped).
   */
  async nextTask(workspaceId: string, waitMs = TASK_LONG_POLL_MS, opts: { tokenAhead?: boolean; as?: PollToken } = {}): Promise<AgentTask | TokenAhead | 'wait' | 'none'> {
    // An agent that started fast (or a serve whose event loop was busy) can ask before its warm-up
    // has registered it: wait for that rather than tell it there is no work.
    const warming = this.#warming.get(workspaceId)
    if (warming) await warming
    const w = this.#warm.get(workspaceId)
    if (!w) return 'none'
    // Narrowest scope (docs/security.md): the warm agent's own start-up token, until it fetched its
    // first task; or the claimed task's token (the agent adopted it from the token ahead).
    if (opts.as && !this.#pollAllowed(w, opts.as)) return 'none'
    const tokenReady = (): boolean => opts.tokenAhead === true && w.ahead !== undefined && !w.ahead.sent
    if (!w.pending && !tokenReady() && !this.#closed) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer)
          if (w.wake === done) w.wake = undefined
          resolve()
        }
        const timer = setTimeout(done, waitMs)
        timer.unref()
        w.wake?.() // an earlier poll (its connection is likely gone) gives way to this one
        w.wake = done
        w.pollTakesToken = opts.tokenAhead === true
      })
    }
    if (this.#warm.get(workspaceId) !== w) return 'none'
    if (opts.as && !this.#pollAllowed(w, opts.as)) return 'none'
    if (w.pending) {
      this.#warm.delete(workspaceId)
      w.startupSpent = true
      return w.pending
    }
    if (w.ahead && tokenReady()) {
      w.ahead.sent = true
      w.startupSpent = true
      return { proxy_token: w.ahead.token }
    }
    return 'wait'
  }

  #pollAllowed(w: WarmAgent, as: PollToken): boolean {
    if (as.startup) return as.jti === w.startupJti && !w.startupSpent
    const claimed = w.ahead?.taskId ?? w.pending?.id
    return as.taskId !== undefined && as.taskId === claimed
  }

  /** At a claim: the waiting agent of the claimed member gets the task's token ahead of the task. */
  async #handTokenAhead(ws: WorkspaceRecord, task: TaskRecord, role: RoleConfig): Promise<boolean> {
    const warm = this.#warm.get(ws.id)
    if (!warm || warm.pending || warm.ahead) return false
    const { token } = await this.#o.tokens.mint({ org_id: ws.org_id, workspace_id: ws.id, task_id: task.id }, this.#taskTimeoutS(role) + 300)
    if (this.#warm.get(ws.id) !== warm || warm.pending) return false
    warm.ahead = { taskId: task.id, token, sent: false }
    if (!warm.pollTakesToken || !warm.wake) return false
    warm.wake()
    return true
  }

  #taskTimeoutS(role: RoleConfig | undefined): number {
    return role?.task_timeout_seconds || this.#o.defaultTaskTimeoutSeconds || DEFAULT_TASK_TIMEOUT_SECONDS
  }

  /** Starts the agent of an idle, unclaimed pool member ahead of its task (caller holds the lock). */
  async #warmUp(ws: WorkspaceRecord): Promise<void> {
    if (this.#o.warmAgents === false || this.#closed || this.#warm.has(ws.id) || this.#running.has(ws.id) || this.#coldMembers.has(ws.id)) return
    const role = await this.#t.role(ws.org_id, { id: ws.role_id })
    let proc: AgentProcess
    let token: string
    let jti: string | undefined
    let registered!: () => void
    this.#warming.set(ws.id, new Promise<void>((resolve) => (registered = resolve)))
    const settle = (): void => {
      this.#warming.delete(ws.id)
      registered()
    }
    try {
      this.#dataDirs.set(ws.id, (await this.#o.runtime.provision({ workspaceId: ws.id })).dataDir)
      const packs = await this.#packsFor(ws, role)
      // A start-up token: the proxy lets it reach GET /tasks/next only, and nextTask takes it once.
      ;({ token, jti } = await this.#o.tokens.mint({ org_id: ws.org_id, workspace_id: ws.id }, WARM_TOKEN_TTL_S, { startup: true }))
      proc = await this.#startAgent(ws.id, packs, {
        ...agentProgram(packs, this.#o.agentCommand),
        proxyToken: token,
        env: { ...(role ? agentEnv(role) : {}), ...this.#o.agentEnv, CORRAL_TASK_SOURCE: 'http' },
      })
    } catch (err) {
      // The member stays provisioned; a claim then starts its agent cold.
      this.#o.logger?.warn({ err, workspace_id: ws.id }, 'warm agent did not start')
      settle()
      return
    }
    const warm: WarmAgent = { process: proc, startedAt: Date.now(), startupJti: jti! }
    this.#warm.set(ws.id, warm)
    settle()
    void proc.exited.then(() => {
      if (this.#warm.get(ws.id) !== warm) return // claimed (the task's own exit handling runs) or dropped
      this.#warm.delete(ws.id)
      warm.wake?.()
      this.#o.logger?.warn({ workspace_id: ws.id, log: proc.logPath }, 'warm agent exited before its task')
      // Started again unless it is failing fast; otherwise a claim starts the agent cold.
      if (Date.now() - warm.startedAt < WARM_RESTART_AFTER_MS) this.#coldMembers.add(ws.id)
      else if (!this.#closed) void this.kick(ws.id)
    })
  }

  /**
   * The role's packs for an agent about to start, remembered as that agent's (its events are
   * checked against their schemas until the next start).
   */
  async #packsFor(ws: WorkspaceRecord, role: RoleConfig | undefined): Promise<WorkspacePacks> {
    const packs = await resolveWorkspacePacks(this.#o.packs, ws.org_id, role?.pack_ids ?? [])
    this.#launchPacks.set(ws.id, packs)
    return packs
  }

  /**
   * Starts an agent with its packs' content trees pinned until it exits: a re-upload or delete
   * meanwhile does not remove a tree the agent still reads (PackContent.removeIfUnused).
   */
  async #startAgent(workspaceId: string, packs: WorkspacePacks, launch: AgentLaunch): Promise<AgentProcess> {
    const pin = this.#o.packs?.pin
    const unpins = pin ? packs.digests.map((d) => pin(d)) : []
    const release = (): void => unpins.forEach((unpin) => unpin())
    try {
      const proc = await this.#o.runtime.startAgent(workspaceId, launch)
      void proc.exited.finally(release)
      return proc
    } catch (err) {
      release()
      throw err
    }
  }

  /**
   * The pack schemas a workspace's agent events must also satisfy: those its running agent was
   * started with; read from the role when no agent of this process started it (a restart).
   */
  async agentEventSchemas(orgId: string, workspaceId: string): Promise<readonly PackEventValidators[]> {
    const known = this.#launchPacks.get(workspaceId)
    if (known) return known.schemas
    const ws = await this.#t.get(orgId, workspaceId)
    if (!ws) return []
    const role = await this.#t.role(ws.org_id, { id: ws.role_id })
    return (await resolveWorkspacePacks(this.#o.packs, orgId, role?.pack_ids ?? [])).schemas
  }

  /** Forgets a warm agent (stop, restart); its pending long poll answers 'none' (410). */
  #dropWarm(workspaceId: string): void {
    const w = this.#warm.get(workspaceId)
    if (!w) return
    this.#warm.delete(workspaceId)
    w.wake?.()
  }

  async #provision(ws: WorkspaceRecord): Promise<boolean> {
    try {
      const handle = await this.#o.runtime.provision({
        workspaceId: ws.id,
        ...(ws.parent_workspace_id && ws.fork_point_task_count ? { forkFrom: { workspaceId: ws.parent_workspace_id, taskCount: ws.fork_point_task_count } } : {}),
      })
      this.#dataDirs.set(ws.id, handle.dataDir)
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err)
      this.#o.logger?.error({ err, workspace_id: ws.id }, 'provisioning failed')
      await this.#t.update(ws.id, { state: 'stopped', desired_state: 'stopped', failure: message.slice(0, 500) })
      for (let t = await this.#t.tasks.nextSubmitted(ws.id); t; t = await this.#t.tasks.nextSubmitted(ws.id)) {
        await this.#finishTask(ws, t.id, 'failed', 'provision_failed')
      }
      return false
    }
    if (await this.#t.transition(ws.id, ['provisioning'], 'idle', { failure: null })) {
      await this.#emit(ws, 'workspace_provisioned', ws.created_by_user_id)
    }
    return true
  }

  async #startTask(ws: WorkspaceRecord, task: TaskRecord): Promise<void> {
    const role = await this.#t.role(ws.org_id, { id: ws.role_id })
    // A member whose warm agent is waiting was provisioned by its warm-up: /data is re-adopted
    // only to place uploads or for an agent started now (a warm claim's hand-over is timed).
    const waiting = this.#warm.get(ws.id)
    if (task.uploads.length || !waiting || waiting.pending) {
      const handle = await this.#o.runtime.provision({ workspaceId: ws.id }) // re-adopts the existing /data
      this.#dataDirs.set(ws.id, handle.dataDir)
      if (task.uploads.length && !(await this.#placeUploads(ws, task))) return
    }
    if (!(await this.#t.tasks.start(task.id))) return
    await this.#t.transition(ws.id, ['idle'], 'busy', { last_activity_at: new Date().toISOString() })
    const timeoutS = this.#taskTimeoutS(role)
    // The disk allowance's baseline is /data before the agent has its task (a warm agent would
    // otherwise already be writing while the first measurement runs).
    const disk = await this.#watchDisk(ws, task.id)
    await disk?.ready
    let proc: AgentProcess
    try {
      const warm = this.#warm.get(ws.id)
      // The token handed ahead at the claim, when this is that task; else one minted now.
      const ahead = warm?.ahead?.taskId === task.id ? warm.ahead.token : undefined
      const token = ahead ?? (await this.#o.tokens.mint({ org_id: ws.org_id, workspace_id: ws.id, task_id: task.id }, timeoutS + 300)).token
      if (warm && !warm.pending) {
        // The pool member's agent is already waiting in GET /tasks/next: no process start.
        warm.pending = { ...agentTask(task), proxy_token: token }
        warm.wake?.()
        proc = warm.process
      } else {
        const packs = await this.#packsFor(ws, role)
        proc = await this.#startAgent(ws.id, packs, {
          ...agentProgram(packs, this.#o.agentCommand),
          proxyToken: token,
          env: { ...(role ? agentEnv(role) : {}), ...this.#o.agentEnv },
          files: { 'tasks.json': JSON.stringify([agentTask(task)]) },
        })
      }
    } catch (err) {
      disk?.stop()
      this.#o.logger?.error({ err, workspace_id: ws.id, task_id: task.id }, 'agent did not start')
      await this.#finishTask(ws, task.id, 'failed', 'agent_start_failed')
      await this.#t.transition(ws.id, ['busy'], 'idle')
      return
    }
    const run: RunningTask = { taskId: task.id, process: proc }
    run.timer = setTimeout(() => void this.#timeout(ws.id, task.id), timeoutS * 1000)
    run.timer.unref()
    run.disk = disk
    this.#running.set(ws.id, run)
    void proc.exited.then((exit) => this.#withLock(ws.id, () => this.#afterAgent(ws.id, task.id, exit)).catch((err: unknown) => {
      this.#o.logger?.error({ err, workspace_id: ws.id }, 'after-task handling failed')
    }))
  }

  /**
   * Moves a task's staged uploads to /data/uploads/<task id>/ through the runtime, which never
   * writes through a link the workspace made. Refused there, the task fails with the reason
   * `upload_refused` and says which path; the workspace stays idle for the next task.
   */
  async #placeUploads(ws: WorkspaceRecord, task: TaskRecord): Promise<boolean> {
    try {
      await this.#o.runtime.placeFiles(ws.id, ['uploads', task.id], this.stagingDir(task.id), task.uploads)
    } catch (err) {
      this.#o.logger?.warn({ err, workspace_id: ws.id, task_id: task.id }, 'uploads not placed')
      const why = err instanceof Error ? err.message : String(err)
      await this.#finishTask(ws, task.id, 'failed', 'upload_refused', `the uploaded files were not placed: ${why}`.slice(0, 1000))
      return false
    } finally {
      await rm(this.stagingDir(task.id), { recursive: true, force: true })
    }
    return true
  }

  /** The disk quota's watch over a task's /data, or none without a quota (docs/runtime.md "Resource limits"). */
  async #watchDisk(ws: WorkspaceRecord, taskId: string): Promise<DiskWatch | undefined> {
    const workspaceId = ws.id
    const quota = quotaBytes(this.#o.diskQuotaMb ?? 0)
    if (quota === 0) return undefined
    // The baseline is known without a measurement when this process measured the previous task's
    // end, or when the workspace never ran a task and is no fork (its /data started empty; what a
    // warm agent wrote before its task counts against the quota). Else it is measured first.
    const baseline = this.#diskSeen.get(workspaceId) ?? (ws.task_count === 0 && ws.fork_point_task_count === undefined ? 0 : undefined)
    let dir = this.#dataDirs.get(workspaceId)
    if (!dir) {
      // Known from the provision or warm-up that came before; asked again only if not.
      try {
        dir = (await this.#o.runtime.provision({ workspaceId })).dataDir
      } catch (err) {
        this.#o.logger?.error({ err, workspace_id: workspaceId, task_id: taskId }, 'disk quota not watched: /data not found')
        return undefined
      }
      this.#dataDirs.set(workspaceId, dir)
    }
    return new DiskWatch({
      dir, quotaBytes: quota, intervalMs: this.#o.diskCheckIntervalMs ?? DEFAULT_DISK_CHECK_INTERVAL_MS,
      onOver: (usage) => void this.#diskOver(workspaceId, taskId, usage, quota),
      onError: (err) => this.#o.logger?.warn({ err, workspace_id: workspaceId }, 'disk quota check failed'),
      ...(baseline !== undefined ? { baselineBytes: baseline } : {}),
    })
  }

  /** Whether a task's /data is being measured against the disk quota now (diagnostics, tests). */
  watchingDisk(workspaceId: string): boolean {
    const disk = this.#running.get(workspaceId)?.disk
    return disk !== undefined && !disk.stopped
  }

  /**
   * /data went over the quota while the task ran: like a timeout, the task fails and the agent is
   * stopped; its exit then snapshots /data (the evidence) and the workspace goes idle, so the next
   * task can delete files. An agent still writing after its own task_end is stopped too.
   */
  async #diskOver(workspaceId: string, taskId: string, usage: DiskUsage, quota: number): Promise<void> {
    await this.#withLock(workspaceId, async () => {
      const ws = await this.#t.byId(workspaceId)
      if (!ws) return
      this.#o.logger?.warn({ workspace_id: workspaceId, task_id: taskId, used_bytes: usage.usedBytes, quota_bytes: quota }, 'workspace over its disk quota')
      await this.#finishTask(ws, taskId, 'failed', 'disk_quota_exceeded', diskOverText(usage.usedBytes, quota))
      if (this.#running.get(workspaceId)?.taskId === taskId) await this.#o.runtime.stopAgent(workspaceId)
    })
  }

  /** The end-of-task measurement: fails the task (if still open) when /data is over the quota. */
  async #diskCheckAtEnd(ws: WorkspaceRecord, taskId: string, disk: DiskWatch | undefined, agentSummary?: string): Promise<boolean> {
    if (!disk) return false
    const over = await disk.check().catch((err: unknown) => {
      this.#o.logger?.warn({ err, workspace_id: ws.id }, 'disk quota check failed')
      return null
    })
    if (disk.lastUsage) this.#diskSeen.set(ws.id, disk.lastUsage.usedBytes)
    if (!over) return false
    const quota = quotaBytes(this.#o.diskQuotaMb ?? 0)
    const text = diskOverText(over.usedBytes, quota)
    return this.#finishTask(ws, taskId, 'failed', 'disk_quota_exceeded', agentSummary ? `${text} The agent reported: ${agentSummary}` : text)
  }

  async #timeout(workspaceId: string, taskId: string): Promise<void> {
    await this.#withLock(workspaceId, async () => {
      const ws = await this.#t.byId(workspaceId)
      if (ws && (await this.#finishTask(ws, taskId, 'failed', 'timeout'))) await this.#o.runtime.stopAgent(workspaceId)
    })
  }

  /** The agent is gone: settle its task, snapshot /data, and go idle (then the next task, if any). */
  async #afterAgent(workspaceId: string, taskId: string, exit?: AgentExit): Promise<void> {
    // After close() this process no longer owns the workspace: the next start's reconcile settles it.
    if (this.#closed) return
    const run = this.#running.get(workspaceId)
    if (run?.taskId !== taskId) return // a stop already settled it
    this.#running.delete(workspaceId)
    if (run.timer) clearTimeout(run.timer)
    run.disk?.stop()
    const ws = await this.#t.byId(workspaceId)
    if (!ws) return
    // Once more before the snapshot: an agent that wrote past the quota between two checks and
    // exited without task_end fails for the quota, not just for exiting.
    if ((await this.#t.tasks.byId(taskId))?.status === 'running') await this.#diskCheckAtEnd(ws, taskId, run.disk)
    if (run.disk?.lastUsage) this.#diskSeen.set(workspaceId, run.disk.lastUsage.usedBytes)
    // An agent that died at a workspace limit (its cgroup says so) fails for that, not just for exiting.
    if (exit?.limitHit) await this.#finishTask(ws, taskId, 'failed', `${exit.limitHit}_limit_exceeded`, LIMIT_HIT_TEXT[exit.limitHit])
    else await this.#finishTask(ws, taskId, 'failed', 'agent_exited')
    const count = ws.task_count + 1
    try {
      const snap = await this.#o.runtime.snapshot(workspaceId, count, 'task')
      await this.#t.update(workspaceId, { task_count: count, last_snapshot_ref: snap.ref, last_activity_at: new Date().toISOString() })
    } catch (err) {
      this.#o.logger?.error({ err, workspace_id: workspaceId }, 'after-task snapshot failed')
      await this.#t.update(workspaceId, { task_count: count })
    }
    await this.#t.transition(workspaceId, ['busy'], 'idle')
    if (!this.#closed) queueMicrotask(() => void this.kick(workspaceId))
  }

  /** Tears the workspace down now (caller holds the lock): cancel its work, stop snapshot, `stopped`. */
  async #stopNow(ws: WorkspaceRecord, actorUserId?: string): Promise<void> {
    this.#clearIdle(ws.id)
    this.#dropWarm(ws.id)
    this.#launchPacks.delete(ws.id)
    this.#dataDirs.delete(ws.id)
    this.#diskSeen.delete(ws.id)
    const run = this.#running.get(ws.id)
    let count = ws.task_count
    if (ws.state === 'provisioning') {
      // Nothing ran yet: no snapshot to take.
      for (let t = await this.#t.tasks.nextSubmitted(ws.id); t; t = await this.#t.tasks.nextSubmitted(ws.id)) await this.#finishTask(ws, t.id, 'cancelled', 'workspace_stopped')
      await this.#t.update(ws.id, { state: 'stopped' })
      await this.#emit(ws, 'workspace_stopped', actorUserId ?? ws.created_by_user_id)
      await this.#o.store.notify(WORKSPACE_STOPPED_CHANNEL, ws.id)
      return
    }
    await this.#t.transition(ws.id, ['idle', 'busy', 'stopping'], 'stopping')
    if (run) {
      this.#running.delete(ws.id)
      if (run.timer) clearTimeout(run.timer)
      run.disk?.stop()
      await this.#finishTask(ws, run.taskId, 'cancelled', 'workspace_stopped')
      count++
    }
    for (const t of await this.#t.tasks.running(ws.id)) await this.#finishTask(ws, t.id, 'failed', 'interrupted')
    for (let t = await this.#t.tasks.nextSubmitted(ws.id); t; t = await this.#t.tasks.nextSubmitted(ws.id)) await this.#finishTask(ws, t.id, 'cancelled', 'workspace_stopped')
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
    await this.#emit(ws, 'workspace_stopped', actorUserId ?? ws.created_by_user_id)
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
      void this.#withLock(ws.id, async () => {
        const now = await this.#t.byId(ws.id)
        if (now?.state !== 'idle' || (await this.#t.tasks.active(ws.id))) return
        await this.#t.update(ws.id, { desired_state: 'stopped' })
        await this.#stopNow(now)
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

  /** Ends a task once (first writer wins) and records `task_completed`. */
  async #finishTask(ws: WorkspaceRecord, taskId: string, status: 'completed' | 'failed' | 'cancelled', reason?: string, summary?: string): Promise<boolean> {
    if (!(await this.#t.tasks.finish(taskId, status, reason, summary))) return false
    // Every proxy stops taking the task's token for outbound traffic (task-liveness.ts).
    await this.#o.store.notify(TASK_ENDED_CHANNEL, `${ws.id}/${taskId}`).catch((err: unknown) => this.#o.logger?.warn({ err, task_id: taskId }, 'task end not announced'))
    await this.#emit(ws, 'task_completed', ws.created_by_user_id, { status, ...(reason ? { reason } : {}) }, taskId)
    return true
  }

  async #mustGet(orgId: string, id: string): Promise<WorkspaceRecord> {
    const ws = await this.#t.get(orgId, id)
    if (!ws) throw apiError('workspace_not_found', `workspace ${id} not found`)
    return ws
  }

  async #emit(ws: WorkspaceRecord, type: EventType, userId: string, detail?: Record<string, unknown>, taskId?: string, category: 'activity' | 'audit' = 'activity'): Promise<void> {
    const event: NewAuditEvent = {
      org_id: ws.org_id, user_id: userId, event_type: type, category, actor: 'control-plane',
      workspace_id: ws.id, agent_role: ws.role_name, agent_provider: ws.provider_name,
      ...(taskId ? { task_id: taskId } : {}), ...(detail ? { detail } : {}),
    }
    await this.#o.audit.emit(event)
  }

  #withLock<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.#locks.get(id) ?? Promise.resolve()
    const next = prev.catch(() => {}).then(fn)
    const tail = next.catch(() => {})
    this.#locks.set(id, tail)
    void tail.then(() => {
      if (this.#locks.get(id) === tail) this.#locks.delete(id)
    })
    return next
  }
}

