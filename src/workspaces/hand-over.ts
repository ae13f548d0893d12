// Warm agents and the hand-over (docs/workspaces.md "Warm pools"). An idle, unclaimed pool member
// runs its agent ahead of its task, long-polling `GET /tasks/next` (nextTask) with a start-up token
// that is good for that poll only. A claim mints the task's token and hands it ahead (the agent
// opens its tunnel with it while the task is being started); the task itself follows through the
// same poll. A warm agent that exits fast leaves its member cold: a claim then starts the agent
// the ordinary way, with the task in its inbox.
import type { Logger } from 'pino'
import type { AgentTask } from '../contract/index.js'
import type { AgentProcess, WorkspaceRuntime } from '../runtime/index.js'
import type { TaskRecord, WorkspaceRecord, WorkspacesRepository } from '../store/index.js'
import type { DiskQuota } from './disk-quota.js'
import type { AgentLauncher } from './launcher.js'
import type { Lifetime, TokenMinter } from './options.js'

/** How long `GET /tasks/next` is held for a warm agent before a 204 (it asks again at once). */
export const TASK_LONG_POLL_MS = 20_000
/** Lifetime of a warm agent's workspace token (it only fetches its task; the task brings its own). */
const WARM_TOKEN_TTL_S = 24 * 3600
/** A warm agent that lived at least this long before exiting unclaimed is started again. */
const WARM_RESTART_AFTER_MS = 60_000

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
  /** The claimed task's capability token, minted at the claim and handed to an agent that asks for it first. */
  ahead?: { taskId: string; token: string; sent: boolean }
  /** The current long poll asked for the token ahead (only such a poll is woken for it). */
  pollTakesToken?: boolean
  /** Ends the current long poll early (a task arrived, or the agent must go). */
  wake?: () => void
}

export interface HandOverOptions {
  runtime: WorkspaceRuntime
  workspaces: WorkspacesRepository
  tokens: TokenMinter
  launcher: AgentLauncher
  disk: DiskQuota
  lifetime: Lifetime
  /** False: pool members are provisioned but their agents start at the claim. */
  warmAgents: boolean
  /** Whether a task's agent runs in the workspace (no warm agent then). */
  running: (workspaceId: string) => boolean
  /** Schedules a reconcile of the workspace (a warm agent that exited after a while starts again). */
  kick: (workspaceId: string) => void
  logger?: Logger
}

export class HandOver {
  readonly #o: HandOverOptions
  readonly #warm = new Map<string, WarmAgent>()
  /** Warm-ups whose agent may already run but is not in #warm yet (settled once it is, or failed). */
  readonly #warming = new Map<string, Promise<void>>()
  /** Pool members whose warm agent exited fast: claims start their agent cold. */
  readonly #cold = new Set<string>()

  constructor(options: HandOverOptions) {
    this.#o = options
  }

  /** A warm agent waits in the workspace (or was handed its task and runs it). */
  has(workspaceId: string): boolean {
    return this.#warm.has(workspaceId)
  }

  /** Takes a member off the cold list (its agent may be warmed again); false when it was not on it. */
  uncold(workspaceId: string): boolean {
    return this.#cold.delete(workspaceId)
  }

  /** An idle pool member that should have a warm agent but has none (a restarted serve). */
  needsWarming(workspaceId: string): boolean {
    return !this.#warm.has(workspaceId) && !this.#cold.has(workspaceId)
  }

  /** The warm agent is waiting for a task not yet given to it: /data need not be re-adopted. */
  waitingIdle(workspaceId: string): boolean {
    const w = this.#warm.get(workspaceId)
    return w !== undefined && !w.pending
  }

  /** The token handed ahead at the claim of `taskId`, if that is this task. */
  tokenAhead(workspaceId: string, taskId: string): string | undefined {
    const w = this.#warm.get(workspaceId)
    return w?.ahead?.taskId === taskId ? w.ahead.token : undefined
  }

  /** Gives the task to the waiting warm agent (no process start); undefined when none waits. */
  deliver(workspaceId: string, task: AgentTask): AgentProcess | undefined {
    const w = this.#warm.get(workspaceId)
    if (!w || w.pending) return undefined
    w.pending = task
    w.wake?.()
    return w.process
  }

  /** At a claim: the waiting agent of the claimed member gets the task's token ahead of the task. */
  async handTokenAhead(ws: WorkspaceRecord, task: TaskRecord, ttlSeconds: number): Promise<boolean> {
    const warm = this.#warm.get(ws.id)
    if (!warm || warm.pending || warm.ahead) return false
    const { token } = await this.#o.tokens.mint({ org_id: ws.org_id, workspace_id: ws.id, task_id: task.id }, ttlSeconds)
    if (this.#warm.get(ws.id) !== warm || warm.pending) return false
    warm.ahead = { taskId: task.id, token, sent: false }
    if (!warm.pollTakesToken || !warm.wake) return false
    warm.wake()
    return true
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
    if (opts.as && !pollAllowed(w, opts.as)) return 'none'
    const tokenReady = (): boolean => opts.tokenAhead === true && w.ahead !== undefined && !w.ahead.sent
    if (!w.pending && !tokenReady() && !this.#o.lifetime.closed) await this.#hold(w, waitMs, opts.tokenAhead === true)
    if (this.#warm.get(workspaceId) !== w) return 'none'
    if (opts.as && !pollAllowed(w, opts.as)) return 'none'
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

  /** The long poll: until woken (a task, the token ahead, a stop) or `waitMs`. */
  #hold(w: WarmAgent, waitMs: number, takesToken: boolean): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer)
        if (w.wake === done) w.wake = undefined
        resolve()
      }
      const timer = setTimeout(done, waitMs)
      timer.unref()
      w.wake?.() // an earlier poll (its connection is likely gone) gives way to this one
      w.wake = done
      w.pollTakesToken = takesToken
    })
  }

  /** Starts the agent of an idle, unclaimed pool member ahead of its task (caller holds the lock). */
  async warmUp(ws: WorkspaceRecord): Promise<void> {
    if (!this.#o.warmAgents || this.#o.lifetime.closed || this.#warm.has(ws.id) || this.#o.running(ws.id) || this.#cold.has(ws.id)) return
    const role = await this.#o.workspaces.role(ws.org_id, { id: ws.role_id })
    let registered!: () => void
    this.#warming.set(ws.id, new Promise<void>((resolve) => (registered = resolve)))
    const settle = (): void => {
      this.#warming.delete(ws.id)
      registered()
    }
    let proc: AgentProcess
    let jti: string | undefined
    try {
      this.#o.disk.remember(ws.id, (await this.#o.runtime.provision({ workspaceId: ws.id })).volume)
      // A start-up token: the proxy lets it reach GET /tasks/next only, and nextTask takes it once.
      const minted = await this.#o.tokens.mint({ org_id: ws.org_id, workspace_id: ws.id }, WARM_TOKEN_TTL_S, { startup: true })
      jti = minted.jti
      proc = await this.#o.launcher.start(ws, role, minted.token, { env: { CORRAL_TASK_SOURCE: 'http' } })
    } catch (err) {
      // The member stays provisioned; a claim then starts its agent cold.
      this.#o.logger?.warn({ err, workspace_id: ws.id }, 'warm agent did not start')
      settle()
      return
    }
    const warm: WarmAgent = { process: proc, startedAt: Date.now(), startupJti: jti! }
    this.#warm.set(ws.id, warm)
    settle()
    void proc.exited.then(() => this.#exitedUnclaimed(ws.id, warm))
  }

  #exitedUnclaimed(workspaceId: string, warm: WarmAgent): void {
    if (this.#warm.get(workspaceId) !== warm) return // claimed (the task's own exit handling runs) or dropped
    this.#warm.delete(workspaceId)
    warm.wake?.()
    this.#o.logger?.warn({ workspace_id: workspaceId, log: warm.process.logPath }, 'warm agent exited before its task')
    // Started again unless it is failing fast; otherwise a claim starts the agent cold.
    if (Date.now() - warm.startedAt < WARM_RESTART_AFTER_MS) this.#cold.add(workspaceId)
    else if (!this.#o.lifetime.closed) this.#o.kick(workspaceId)
  }

  /**
   * A role change reached an idle member (caller holds the lock): its warm agent read the old role
   * at its start, so it is started again with the new one; a cold member gets another chance.
   */
  async restart(workspaceId: string): Promise<void> {
    const w = this.#warm.get(workspaceId)
    if (w?.pending) return
    if (w) {
      this.drop(workspaceId)
      await this.#o.runtime.stopAgent(workspaceId)
    }
    const now = await this.#o.workspaces.byId(workspaceId)
    if (now?.state === 'idle' && now.pooled) await this.warmUp(now)
  }

  /** Forgets a warm agent (stop, restart); its pending long poll answers 'none' (410). */
  drop(workspaceId: string): void {
    const w = this.#warm.get(workspaceId)
    if (!w) return
    this.#warm.delete(workspaceId)
    w.wake?.()
  }

  /** Ends every long poll (close). */
  wakeAll(): void {
    for (const w of this.#warm.values()) w.wake?.()
  }
}

function pollAllowed(w: WarmAgent, as: PollToken): boolean {
  if (as.startup) return as.jti === w.startupJti && !w.startupSpent
  const claimed = w.ahead?.taskId ?? w.pending?.id
  return as.taskId !== undefined && as.taskId === claimed
}
