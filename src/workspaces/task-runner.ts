// One task from its start to its end (docs/workspaces.md "Tasks"). One agent process per task: the
// task is handed over in `$CORRAL_INBOX/tasks.json` (or to the pool member's waiting agent, see
// hand-over.ts), the agent reports through the proxy (agent-callbacks.ts), ends with `task_end` and
// exits; then /data is snapshotted and the workspace is idle again. A timeout, a workspace limit or
// the disk quota fails the task and stops its agent; the agent's exit settles the rest.
import { rm } from 'node:fs/promises'
import type { Logger } from 'pino'
import type { TaskStatus as TaskOutcomeStatus } from '../contract/index.js'
import type { AgentExit, AgentProcess, LimitHit, WorkspaceRuntime, WorkspaceVolume } from '../runtime/index.js'
import type { RoleConfig, TaskRecord, WorkspaceRecord, WorkspacesRepository } from '../store/index.js'
import { agentTask } from './agent-launch.js'
import type { DiskQuota } from './disk-quota.js'
import type { DiskUsage, DiskWatch } from './disk-watch.js'
import type { HandOver } from './hand-over.js'
import type { AgentLauncher } from './launcher.js'
import type { WorkspaceLocks } from './locks.js'
import type { Lifetime, TokenMinter } from './options.js'
import type { LifecycleRecords } from './records.js'

export const DEFAULT_TASK_TIMEOUT_SECONDS = 3600

/** The summary of a task whose agent died at a workspace limit (docs/runtime.md "Resource limits"). */
const LIMIT_HIT_TEXT: Record<LimitHit, string> = {
  memory: 'The workspace reached its memory limit (CORRAL_WORKSPACE_MEMORY_MB, all its processes and /tmp together): the kernel killed a process of it.',
  pids: 'The workspace reached its process limit (CORRAL_WORKSPACE_PIDS): a process of it could not be started.',
}

interface RunningTask {
  taskId: string
  process: AgentProcess
  timer?: NodeJS.Timeout
  /** Measures /data against the disk quota while the agent runs (none without a quota). */
  disk?: DiskWatch
}

export interface TaskRunnerOptions {
  runtime: WorkspaceRuntime
  workspaces: WorkspacesRepository
  tokens: TokenMinter
  records: LifecycleRecords
  locks: WorkspaceLocks
  launcher: AgentLauncher
  disk: DiskQuota
  handOver: HandOver
  lifetime: Lifetime
  /** Where a task's uploads wait until they are placed in /data. */
  stagingDir: (taskId: string) => string
  /** Schedules a reconcile of the workspace (its next queued task). */
  kick: (workspaceId: string) => void
  defaultTaskTimeoutSeconds?: number
  logger?: Logger
}

export class TaskRunner {
  readonly #o: TaskRunnerOptions
  readonly #running = new Map<string, RunningTask>()

  constructor(options: TaskRunnerOptions) {
    this.#o = options
  }

  /** A task's agent runs in the workspace (started by this process). */
  isRunning(workspaceId: string): boolean {
    return this.#running.has(workspaceId)
  }

  /** The id of the task whose agent this process runs in the workspace, if any. */
  runningTask(workspaceId: string): string | undefined {
    return this.#running.get(workspaceId)?.taskId
  }

  /**
   * Watches an agent that another replica started and a driver adopted (a takeover that keeps the
   * task going, reconcile.ts): its remaining time and its exit are this process's now.
   */
  async attach(ws: WorkspaceRecord, task: TaskRecord, proc: AgentProcess): Promise<void> {
    const role = await this.#o.workspaces.role(ws.org_id, { id: ws.role_id })
    const started = task.started_at ? Date.parse(task.started_at) : Date.now()
    const leftMs = Math.max(0, started + this.timeoutSeconds(role) * 1000 - Date.now())
    const run: RunningTask = { taskId: task.id, process: proc }
    run.timer = setTimeout(() => void this.#timeout(ws.id, task.id), leftMs)
    run.timer.unref()
    this.#running.set(ws.id, run)
    this.#o.launcher.follow(proc)
    void proc.exited.then((exit) => this.#o.locks.run(ws.id, () => this.#afterAgent(ws.id, task.id, exit)).catch((err: unknown) => {
      this.#o.logger?.error({ err, workspace_id: ws.id }, 'after-task handling failed')
    }))
  }

  /** Whether a task's /data is being measured against the disk quota now (diagnostics, tests). */
  watchingDisk(workspaceId: string): boolean {
    const disk = this.#running.get(workspaceId)?.disk
    return disk !== undefined && !disk.stopped
  }

  timeoutSeconds(role: RoleConfig | undefined): number {
    return role?.task_timeout_seconds || this.#o.defaultTaskTimeoutSeconds || DEFAULT_TASK_TIMEOUT_SECONDS
  }

  /** Starts the workspace's next task (caller holds the lock; the workspace is idle). */
  async start(ws: WorkspaceRecord, task: TaskRecord): Promise<void> {
    const role = await this.#o.workspaces.role(ws.org_id, { id: ws.role_id })
    // A member whose warm agent is waiting was provisioned by its warm-up: /data is re-adopted
    // only to place uploads or for an agent started now (a warm claim's hand-over is timed).
    if (task.uploads.length || !this.#o.handOver.waitingIdle(ws.id)) {
      const handle = await this.#o.runtime.provision({ workspaceId: ws.id }) // re-adopts the existing /data
      this.#o.disk.remember(ws.id, handle.volume)
      if (task.uploads.length && !(await this.#placeUploads(ws, task, handle.volume))) return
    }
    if (!(await this.#o.workspaces.tasks.start(task.id))) return
    await this.#o.workspaces.transition(ws.id, ['idle'], 'busy', { last_activity_at: new Date().toISOString() })
    const timeoutS = this.timeoutSeconds(role)
    // The disk allowance's baseline is /data before the agent has its task (a warm agent would
    // otherwise already be writing while the first measurement runs).
    const disk = await this.#o.disk.watch(ws, task.id, (usage) => void this.#diskOver(ws.id, task.id, usage))
    await disk?.ready
    let proc: AgentProcess
    try {
      proc = await this.#launch(ws, task, role, timeoutS)
    } catch (err) {
      disk?.stop()
      this.#o.logger?.error({ err, workspace_id: ws.id, task_id: task.id }, 'agent did not start')
      await this.#o.records.finishTask(ws, task.id, 'failed', 'agent_start_failed')
      await this.#o.workspaces.transition(ws.id, ['busy'], 'idle')
      return
    }
    const run: RunningTask = { taskId: task.id, process: proc, disk }
    run.timer = setTimeout(() => void this.#timeout(ws.id, task.id), timeoutS * 1000)
    run.timer.unref()
    this.#running.set(ws.id, run)
    void proc.exited.then((exit) => this.#o.locks.run(ws.id, () => this.#afterAgent(ws.id, task.id, exit)).catch((err: unknown) => {
      this.#o.logger?.error({ err, workspace_id: ws.id }, 'after-task handling failed')
    }))
  }

  /** The task's agent: the waiting warm agent given the task, or one started now with it in its inbox. */
  async #launch(ws: WorkspaceRecord, task: TaskRecord, role: RoleConfig | undefined, timeoutS: number): Promise<AgentProcess> {
    // The token handed ahead at the claim, when this is that task; else one minted now.
    const token = this.#o.handOver.tokenAhead(ws.id, task.id)
      ?? (await this.#o.tokens.mint({ org_id: ws.org_id, workspace_id: ws.id, task_id: task.id }, timeoutS + 300)).token
    const warm = this.#o.handOver.deliver(ws.id, { ...agentTask(task), proxy_token: token })
    if (warm) return warm
    return this.#o.launcher.start(ws, role, token, { files: { 'tasks.json': JSON.stringify([agentTask(task)]) } })
  }

  /**
   * Moves a task's staged uploads to /data/uploads/<task id>/ through the workspace's volume, which
   * never writes through a link the workspace made. Refused there, the task fails with the reason
   * `upload_refused` and says which path; the workspace stays idle for the next task.
   */
  async #placeUploads(ws: WorkspaceRecord, task: TaskRecord, volume: WorkspaceVolume): Promise<boolean> {
    const staged = this.#o.stagingDir(task.id)
    const refused = await volume.placeFiles(['uploads', task.id], staged, task.uploads).then(() => undefined, (err: unknown) => err ?? new Error('refused'))
    // The staged files go before the task's end is written: whoever sees the end sees them gone.
    await rm(staged, { recursive: true, force: true })
    if (refused === undefined) return true
    this.#o.logger?.warn({ err: refused, workspace_id: ws.id, task_id: task.id }, 'uploads not placed')
    const why = refused instanceof Error ? refused.message : String(refused)
    await this.#o.records.finishTask(ws, task.id, 'failed', 'upload_refused', `the uploaded files were not placed: ${why}`.slice(0, 1000))
    return false
  }

  /**
   * /data went over the quota while the task ran: like a timeout, the task fails and the agent is
   * stopped; its exit then snapshots /data (the evidence) and the workspace goes idle, so the next
   * task can delete files. An agent still writing after its own task_end is stopped too.
   */
  async #diskOver(workspaceId: string, taskId: string, usage: DiskUsage): Promise<void> {
    await this.#o.locks.run(workspaceId, async () => {
      const ws = await this.#o.workspaces.byId(workspaceId)
      if (!ws) return
      this.#o.logger?.warn({ workspace_id: workspaceId, task_id: taskId, used_bytes: usage.usedBytes, quota_bytes: this.#o.disk.quotaBytes }, 'workspace over its disk quota')
      await this.#o.records.finishTask(ws, taskId, 'failed', 'disk_quota_exceeded', this.#o.disk.overText(usage))
      if (this.#running.get(workspaceId)?.taskId === taskId) await this.#o.runtime.stopAgent(workspaceId)
    })
  }

  /** The end-of-task measurement: fails the task (if still open) when /data is over the quota. */
  async #diskCheckAtEnd(ws: WorkspaceRecord, taskId: string, disk: DiskWatch | undefined, agentSummary?: string): Promise<boolean> {
    if (!disk) return false
    const over = await this.#o.disk.checkAtEnd(ws.id, disk)
    if (!over) return false
    const text = this.#o.disk.overText(over)
    return this.#o.records.finishTask(ws, taskId, 'failed', 'disk_quota_exceeded', agentSummary ? `${text} The agent reported: ${agentSummary}` : text)
  }

  async #timeout(workspaceId: string, taskId: string): Promise<void> {
    await this.#o.locks.run(workspaceId, async () => {
      const ws = await this.#o.workspaces.byId(workspaceId)
      if (ws && (await this.#o.records.finishTask(ws, taskId, 'failed', 'timeout'))) await this.#o.runtime.stopAgent(workspaceId)
    })
  }

  /** The agent is gone: settle its task, snapshot /data, and go idle (then the next task, if any). */
  async #afterAgent(workspaceId: string, taskId: string, exit?: AgentExit): Promise<void> {
    // After close() this process no longer owns the workspace: the next start's reconcile settles it.
    if (this.#o.lifetime.closed) return
    const run = this.#running.get(workspaceId)
    if (run?.taskId !== taskId) return // a stop already settled it
    this.#forget(workspaceId, run)
    const ws = await this.#o.workspaces.byId(workspaceId)
    if (!ws) return
    // Once more before the snapshot, with the agent gone: an agent that wrote past the quota
    // between two checks and exited without task_end fails for the quota, not just for exiting;
    // and this size is the next task's baseline.
    const over = run.disk ? await this.#o.disk.checkAfterExit(workspaceId, run.disk) : null
    if (over && (await this.#o.workspaces.tasks.byId(taskId))?.status === 'running') {
      await this.#o.records.finishTask(ws, taskId, 'failed', 'disk_quota_exceeded', this.#o.disk.overText(over))
    }
    // An agent that died at a workspace limit (its cgroup says so) fails for that, not just for exiting.
    if (exit?.limitHit) await this.#o.records.finishTask(ws, taskId, 'failed', `${exit.limitHit}_limit_exceeded`, LIMIT_HIT_TEXT[exit.limitHit])
    else await this.#o.records.finishTask(ws, taskId, 'failed', 'agent_exited')
    const count = ws.task_count + 1
    try {
      const snap = await this.#o.runtime.snapshot(workspaceId, count, 'task')
      await this.#o.workspaces.update(workspaceId, { task_count: count, last_snapshot_ref: snap.ref, last_activity_at: new Date().toISOString() })
    } catch (err) {
      this.#o.logger?.error({ err, workspace_id: workspaceId }, 'after-task snapshot failed')
      await this.#o.workspaces.update(workspaceId, { task_count: count })
    }
    await this.#o.workspaces.transition(workspaceId, ['busy'], 'idle')
    if (!this.#o.lifetime.closed) queueMicrotask(() => this.#o.kick(workspaceId))
  }

  /** Called by the agent callback when the agent reports `task_end` (caller holds the lock). First writer wins. */
  async agentEnded(ws: WorkspaceRecord, taskId: string, status: TaskOutcomeStatus, reason?: string, summary?: string): Promise<void> {
    // A task that ends `completed` is measured first: over the quota it fails instead (the
    // agent's own summary kept after ours). A failure the agent reports keeps its reason.
    const run = this.#running.get(ws.id)
    if (status === 'completed' && run?.taskId === taskId && (await this.#o.workspaces.tasks.byId(taskId))?.status === 'running') {
      if (await this.#diskCheckAtEnd(ws, taskId, run.disk, summary)) return
      // Likewise a workspace limit hit while the task ran (a process killed or refused): the
      // agent's `completed` may not know what it lost, so the task fails for the limit.
      const hit = await run.process.limitHit?.().catch(() => undefined)
      if (hit) {
        await this.#o.records.finishTask(ws, taskId, 'failed', `${hit}_limit_exceeded`, summary ? `${LIMIT_HIT_TEXT[hit]} The agent reported: ${summary}` : LIMIT_HIT_TEXT[hit])
        return
      }
    }
    await this.#o.records.finishTask(ws, taskId, status, reason, summary)
  }

  /** A cancelled task's agent is stopped when it is the one running (caller holds the lock). */
  async stopIfRunning(workspaceId: string, taskId: string): Promise<void> {
    if (this.#running.get(workspaceId)?.taskId === taskId) await this.#o.runtime.stopAgent(workspaceId)
  }

  /** For a stop: the running task's id, no longer tracked (its exit then settles nothing). */
  takeRunning(workspaceId: string): string | undefined {
    const run = this.#running.get(workspaceId)
    if (run) this.#forget(workspaceId, run)
    return run?.taskId
  }

  #forget(workspaceId: string, run: RunningTask): void {
    this.#running.delete(workspaceId)
    if (run.timer) clearTimeout(run.timer)
    run.disk?.stop()
  }

  /** Timers and watches end with serve; agents die with it (the next start's reconcile fails their tasks). */
  close(): void {
    for (const r of this.#running.values()) {
      if (r.timer) clearTimeout(r.timer)
      r.disk?.stop()
    }
  }
}
