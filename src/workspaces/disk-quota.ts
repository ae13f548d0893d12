// The disk quota over a running task's /data (docs/runtime.md "Resource limits"): which watch a task
// gets, from what baseline, and the end-of-task measurement. The task runner decides what an
// over-quota task becomes; this file only measures and remembers.
import type { Logger } from 'pino'
import type { WorkspaceRuntime, WorkspaceVolume } from '../runtime/index.js'
import type { WorkspaceRecord } from '../store/index.js'
import { DiskWatch, diskOverText, overQuota, quotaBytes, type DiskUsage } from './disk-watch.js'

/** How often /data is measured against the disk quota while a task runs (docs/runtime.md "Resource limits"). */
export const DEFAULT_DISK_CHECK_INTERVAL_MS = 2_000

export interface DiskQuotaOptions {
  runtime: WorkspaceRuntime
  /** MiB; 0 or unset = no quota (no watch at all). */
  quotaMb?: number
  intervalMs?: number
  logger?: Logger
}

export class DiskQuota {
  readonly #o: DiskQuotaOptions
  readonly quotaBytes: number
  /** Each provisioned workspace's /data (from the runtime's handles). */
  readonly #volumes = new Map<string, WorkspaceVolume>()
  /** /data's size measured after the last task's agent exited, per workspace (the next task's baseline). */
  readonly #seen = new Map<string, DiskUsage>()

  constructor(options: DiskQuotaOptions) {
    this.#o = options
    this.quotaBytes = quotaBytes(options.quotaMb ?? 0)
  }

  /** A workspace's /data, as its provision (or re-adoption) handed it over. */
  remember(workspaceId: string, volume: WorkspaceVolume): void {
    this.#volumes.set(workspaceId, volume)
  }

  forget(workspaceId: string): void {
    this.#volumes.delete(workspaceId)
    this.#seen.delete(workspaceId)
  }

  /** The text of a task that failed over the quota (or at it, where the kernel refused the rest). */
  overText(usage: DiskUsage): string {
    return diskOverText(usage.usedBytes, this.quotaBytes, usage)
  }

  /** The quota's watch over a task's /data, or none without a quota. */
  async watch(ws: WorkspaceRecord, taskId: string, onOver: (usage: DiskUsage) => void): Promise<DiskWatch | undefined> {
    if (this.quotaBytes === 0) return undefined
    const workspaceId = ws.id
    // The baseline is known without a measurement when this process measured the previous task's
    // end, or when the workspace never ran a task and is no fork (its /data started empty; what a
    // warm agent wrote before its task counts against the quota). Else it is measured first.
    const seen = this.#seen.get(workspaceId)
    const baseline = seen?.usedBytes ?? (ws.task_count === 0 && ws.fork_point_task_count === undefined ? 0 : undefined)
    let volume = this.#volumes.get(workspaceId)
    if (!volume) {
      // Known from the provision or warm-up that came before; asked again only if not.
      try {
        volume = (await this.#o.runtime.provision({ workspaceId })).volume
      } catch (err) {
        this.#o.logger?.error({ err, workspace_id: workspaceId, task_id: taskId }, 'disk quota not watched: /data not found')
        return undefined
      }
      this.#volumes.set(workspaceId, volume)
    }
    const measured = volume
    return new DiskWatch({
      measure: (options) => measured.usage(options), quotaBytes: this.quotaBytes, intervalMs: this.#o.intervalMs ?? DEFAULT_DISK_CHECK_INTERVAL_MS, onOver,
      onError: (err) => this.#o.logger?.warn({ err, workspace_id: workspaceId }, 'disk quota check failed'),
      ...(baseline !== undefined ? { baselineBytes: baseline, baselineFull: seen?.full === true } : {}),
    })
  }

  /** The end-of-task measurement: the usage when /data is over the quota, else null (also when unknown). */
  async checkAtEnd(workspaceId: string, disk: DiskWatch): Promise<DiskUsage | null> {
    const over = await disk.check().catch((err: unknown) => {
      this.#o.logger?.warn({ err, workspace_id: workspaceId }, 'disk quota check failed')
      return null
    })
    return over
  }

  /**
   * The measurement once the agent is gone, when nothing can write /data any more: the usage when
   * over the quota, else null. Only this one becomes the next task's baseline — a periodic one may
   * predate what the agent wrote before it was stopped (an agent stopped over the quota goes on
   * writing until it dies). When it fails, the last known size decides over-or-not and the next
   * task measures /data before it starts.
   */
  async checkAfterExit(workspaceId: string, disk: DiskWatch): Promise<DiskUsage | null> {
    this.#seen.delete(workspaceId)
    let usage: DiskUsage | undefined
    try {
      usage = await disk.measureNow()
      this.#seen.set(workspaceId, usage)
    } catch (err) {
      this.#o.logger?.warn({ err, workspace_id: workspaceId }, 'disk quota check failed')
      usage = disk.lastUsage
    }
    return usage && overQuota(usage, this.quotaBytes) ? usage : null
  }
}
