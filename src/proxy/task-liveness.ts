// Whether a task token's task is still live (docs/security.md "Tokens with the narrowest scope"):
// a task token outlives its task by design (it expires at the task timeout plus a margin), so
// once the task has ended — completed, failed, cancelled, timed out, over a limit — its token must
// stop reaching the proxy, or an agent could keep spending on an ended task's budgets while the
// next task runs. Looked up once per task and cached; the controller announces every ended task on
// TASK_ENDED_CHANNEL (NOTIFY on PostgreSQL, so every replica hears it), which flips the cache.

export { TASK_ENDED_CHANNEL } from '../store/index.js'

/** Statuses after which a task's token is refused. */
const ENDED = new Set(['completed', 'failed', 'cancelled'])
/** Cached tasks; past this the cache starts over (each entry costs one lookup to rebuild). */
const MAX_CACHED = 10_000

export interface TaskStatusLookup {
  /** The task's workspace and status, or undefined when no such task exists. */
  taskStatus(taskId: string): Promise<{ workspace_id: string; status: string } | undefined>
}

export class TaskLiveness {
  readonly #lookup: TaskStatusLookup
  /** task id → live (true) or ended/unknown (false). */
  readonly #known = new Map<string, boolean>()

  constructor(lookup: TaskStatusLookup) {
    this.#lookup = lookup
  }

  /** True while the task exists in `workspaceId` and has not ended; a promise only when not cached yet. */
  live(workspaceId: string, taskId: string): boolean | Promise<boolean> {
    const key = `${workspaceId}/${taskId}`
    const cached = this.#known.get(key)
    if (cached !== undefined) return cached
    return this.#lookup.taskStatus(taskId).then((row) => {
      const live = row !== undefined && row.workspace_id === workspaceId && !ENDED.has(row.status)
      if (this.#known.size >= MAX_CACHED) this.#known.clear()
      this.#known.set(key, live)
      return live
    })
  }

  /** The payload of TASK_ENDED_CHANNEL: `<workspace id>/<task id>`. */
  ended(key: string): void {
    if (this.#known.size >= MAX_CACHED) this.#known.clear()
    this.#known.set(key, false)
  }
}
