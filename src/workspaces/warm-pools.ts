// Warm pools (docs/workspaces.md "Warm pools", "Dynamic pools"): each pooled role keeps a target of
// unclaimed members (provisioning or idle) ready for a task's create to claim. `static`: the role's
// pool_size. `dynamic`: pool_size raised by recent claim pressure up to pool_max_size, surplus
// members retired once idle long enough. Members' agents are warmed by the hand-over (hand-over.ts).
import type { Logger } from 'pino'
import { SYSTEM_USER } from '../contract/index.js'
import type { Store, WorkspaceRecord, WorkspacesRepository } from '../store/index.js'
import type { HandOver } from './hand-over.js'
import type { WorkspaceLocks } from './locks.js'
import type { Lifetime } from './options.js'
import type { LifecycleRecords } from './records.js'

/** A `dynamic` pool's pressure raises its target for this long (docs/workspaces.md "Dynamic pools"). */
export const DEFAULT_POOL_DEMAND_WINDOW_MS = 5 * 60_000
/** Surplus members of a `dynamic` pool idle this long are stopped, when the role has no idle_timeout_seconds. */
export const DEFAULT_POOL_IDLE_SECONDS = 600
/**
 * A pool refill asked for by a task's create starts this much later, so bringing up the new member
 * (provisioning, a sandbox and its agent starting) does not compete for CPU with the claimed
 * member's hand-over or the new workspace's start (docs/runtime.md "Benchmark").
 */
const REFILL_AFTER_CREATE_MS = 500

export interface WarmPoolsOptions {
  store: Store
  records: LifecycleRecords
  locks: WorkspaceLocks
  handOver: HandOver
  lifetime: Lifetime
  /** Schedules a reconcile of the workspace (a new member's provision, a cold member's warm-up). */
  kick: (workspaceId: string) => void
  /** Stops a workspace now (caller holds its lock). */
  stopNow: (ws: WorkspaceRecord) => Promise<void>
  warmAgents: boolean
  now?: () => number
  poolDemandWindowMs?: number
  logger?: Logger
}

/** The role fields the pool rule reads. */
export interface PoolRole {
  id: string
  pool_policy: string | null
  pool_size?: number | null
  pool_max_size?: number | null
}

export class WarmPools {
  readonly #o: WarmPoolsOptions
  readonly #t: WorkspacesRepository
  /** Per `dynamic` role: when claims found its pool empty or drained it (clock ms, newest last). */
  readonly #pressure = new Map<string, number[]>()
  #fill: Promise<void> | undefined
  #fillAgain = false
  #fillTimer: NodeJS.Timeout | undefined

  constructor(options: WarmPoolsOptions) {
    this.#o = options
    this.#t = options.store.workspaces
  }

  /**
   * Keeps each pooled role's warm pool at its target. One pass at a time: a call during a pass asks
   * for another one and resolves when it ran, so the ceiling holds against concurrent fills and an
   * awaited call always sees a full pass.
   */
  fill(): Promise<void> {
    if (this.#o.lifetime.closed) return Promise.resolve()
    if (this.#fill) {
      this.#fillAgain = true
      return this.#fill
    }
    const run = async (): Promise<void> => {
      try {
        do {
          this.#fillAgain = false
          await this.#fillOnce().catch((err: unknown) => this.#o.logger?.error({ err }, 'warm pool fill failed'))
        } while (this.#fillAgain && !this.#o.lifetime.closed)
      } finally {
        this.#fill = undefined
      }
    }
    this.#fill = run()
    return this.#fill
  }

  /** One fill() after REFILL_AFTER_CREATE_MS; creates in between share it. */
  fillSoon(): void {
    if (this.#fillTimer || this.#o.lifetime.closed) return
    this.#fillTimer = setTimeout(() => {
      this.#fillTimer = undefined
      void this.fill()
    }, REFILL_AFTER_CREATE_MS)
    this.#fillTimer.unref()
  }

  close(): void {
    if (this.#fillTimer) clearTimeout(this.#fillTimer)
  }

  /** The number of unclaimed members a pooled role should have now (docs/workspaces.md). */
  target(role: PoolRole): number {
    const size = role.pool_size ?? 0
    if (role.pool_policy !== 'dynamic') return size
    const ceiling = Math.max(size, role.pool_max_size ?? size)
    return Math.min(ceiling, size + this.#recentPressure(role.id))
  }

  async #fillOnce(): Promise<void> {
    for (const pool of await this.#t.pooledRoles()) {
      if (this.#o.lifetime.closed) return
      const role = await this.#o.store.agentRoles.get(pool.org_id, pool.role_id)
      const target = role ? this.target(role) : pool.pool_size
      const have = await this.#t.poolCount(pool.role_id)
      if (role?.pool_policy === 'dynamic' && have > target) await this.#shrink(pool.org_id, pool.role_id, have - target, role.idle_timeout_seconds)
      for (let i = have; i < target; i++) {
        const id = await this.#t.create(pool.org_id, { role_id: pool.role_id, created_by: SYSTEM_USER, created_by_user_id: SYSTEM_USER, pooled: true })
        const ws = (await this.#t.byId(id))!
        await this.#o.records.emit(ws, 'workspace_created', SYSTEM_USER, { forked: false, pooled: true })
        this.#o.kick(id)
      }
      // Idle members without a waiting agent (a restarted serve): warm them. Members whose
      // agent failed fast stay cold.
      if (!this.#o.warmAgents) continue
      for (const w of await this.#t.list(pool.org_id, { state: ['idle'], role: pool.role_id })) {
        if (w.pooled && this.#o.handOver.needsWarming(w.id)) this.#o.kick(w.id)
      }
    }
  }

  /**
   * Retires up to `surplus` unclaimed members of a `dynamic` pool that have been idle for the
   * role's idle_timeout_seconds (default DEFAULT_POOL_IDLE_SECONDS), oldest first. A member is
   * taken out of the pool with the same guarded claim a task uses, so a concurrent task claim
   * never gets a workspace that is being stopped.
   */
  async #shrink(orgId: string, roleId: string, surplus: number, idleTimeoutS: number | undefined): Promise<void> {
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
      await this.#o.locks.run(id, async () => {
        await this.#t.update(id, { desired_state: 'stopped' })
        const ws = await this.#t.byId(id)
        if (ws) await this.#o.stopNow(ws)
      })
    }
  }

  /** Records one claim of a `dynamic` role: pressure when it found no ready member or left none. */
  async noteDemand(orgId: string, roleId: string, claimed: boolean): Promise<void> {
    const ready = claimed ? (await this.#t.list(orgId, { state: ['idle'], role: roleId })).some((w) => w.pooled) : false
    if (claimed && ready) return
    const list = this.#pressure.get(roleId) ?? []
    list.push(this.#now())
    this.#pressure.set(roleId, list)
  }

  /** Pressure events of a role inside the demand window (older ones are forgotten). */
  #recentPressure(roleId: string): number {
    const list = this.#pressure.get(roleId)
    if (!list) return 0
    const since = this.#now() - (this.#o.poolDemandWindowMs ?? DEFAULT_POOL_DEMAND_WINDOW_MS)
    const kept = list.filter((t) => t > since)
    if (kept.length) this.#pressure.set(roleId, kept)
    else this.#pressure.delete(roleId)
    return kept.length
  }

  #now(): number {
    return this.#o.now ? this.#o.now() : Date.now()
  }
}
