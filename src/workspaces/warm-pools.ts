// Warm pools (docs/workspaces.md "Warm pools", "Dynamic pools", "Warm pools across replicas"): each
// pooled role keeps a target of unclaimed members (provisioning or idle) ready for a task's create
// to claim. `static`: the role's pool_size. `dynamic`: pool_size raised by recent claim pressure up
// to pool_max_size, surplus members retired once idle long enough. Members' agents are warmed by
// the hand-over (hand-over.ts). Across replicas the target is global: one fill step (count, retire,
// create) runs under the role's pool lock in one transaction, each new member's lease is taken by
// the replica that made it, and pressure events are rows every replica reads (`pool_demand`).
import type { Logger } from 'pino'
import { SYSTEM_USER } from '../contract/index.js'
import type { Store, WorkspacesRepository } from '../store/index.js'
import type { Ownership } from './ownership.js'
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
  /**
   * Reconciles a workspace now and resolves when that ran (a retired member, desired `stopped`,
   * is stopped by the replica that owns it: here, or its owner is nudged).
   */
  reconcileNow: (workspaceId: string) => Promise<void>
  /** Which replica owns a new member (its lease is taken as it is made); SOLO_OWNERSHIP on one process. */
  ownership: Ownership
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
      if (role?.pool_policy === 'dynamic') await this.#refreshPressure(role.id)
      const target = role ? this.target(role) : pool.pool_size
      // Count, retire and create as one step for every replica: the target is global.
      const { created, retired } = await this.#o.records.mutate(async (tx, record) => {
        await tx.workspaces.lockPool(pool.role_id)
        const have = await tx.workspaces.poolCount(pool.role_id)
        const retired = role?.pool_policy === 'dynamic' && have > target
          ? await this.#retirees(tx.workspaces, pool.org_id, pool.role_id, have - target, role.idle_timeout_seconds)
          : []
        const created: string[] = []
        for (let i = have; i < target; i++) {
          const id = await tx.workspaces.create(pool.org_id, { role_id: pool.role_id, created_by: SYSTEM_USER, created_by_user_id: SYSTEM_USER, pooled: true })
          record((await tx.workspaces.byId(id))!, 'workspace_created', SYSTEM_USER, { forked: false, pooled: true })
          created.push(id)
        }
        return { created, retired }
      })
      for (const id of created) {
        // The member's lease: this replica provisions it and warms its agent.
        await this.#o.ownership.claim(id)
        this.#o.kick(id)
      }
      for (const id of retired) await this.#o.reconcileNow(id)
      // Idle members without a waiting agent (a restarted serve): warm them. Members whose
      // agent failed fast stay cold.
      if (!this.#o.warmAgents) continue
      for (const w of await this.#t.list(pool.org_id, { state: ['idle'], role: pool.role_id })) {
        if (w.pooled && this.#o.handOver.needsWarming(w.id)) this.#o.kick(w.id)
      }
    }
  }

  /**
   * Picks up to `surplus` unclaimed members of a `dynamic` pool that have been idle for the
   * role's idle_timeout_seconds (default DEFAULT_POOL_IDLE_SECONDS), oldest first, and takes them
   * out of the pool (inside the fill's transaction) with the same guarded claim a task uses, so a
   * concurrent task claim never gets a workspace that is being stopped; their desired state is
   * `stopped` at once, so a replica that dies before stopping them leaves the stop to the reconcile.
   */
  async #retirees(t: WorkspacesRepository, orgId: string, roleId: string, surplus: number, idleTimeoutS: number | undefined): Promise<string[]> {
    const idleMs = (idleTimeoutS && idleTimeoutS > 0 ? idleTimeoutS : DEFAULT_POOL_IDLE_SECONDS) * 1000
    const now = this.#now()
    const idle = (await t.list(orgId, { state: ['idle'], role: roleId })).filter((w) => w.pooled)
    idle.sort((a, b) => a.created_at.localeCompare(b.created_at) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    const out: string[] = []
    for (const w of idle) {
      if (out.length >= surplus || now - Date.parse(w.updated_at) < idleMs) break
      if (!(await t.claimPooledId(w.id, { created_by: SYSTEM_USER, created_by_user_id: SYSTEM_USER }))) continue
      await t.update(w.id, { desired_state: 'stopped', desired_by: SYSTEM_USER })
      out.push(w.id)
    }
    return out
  }

  /**
   * Records one claim of a `dynamic` role: pressure when it found no ready member or left none.
   * The event is a row every replica reads at its next fill (and counted here at once).
   */
  async noteDemand(orgId: string, roleId: string, claimed: boolean): Promise<void> {
    const ready = claimed ? (await this.#t.list(orgId, { state: ['idle'], role: roleId })).some((w) => w.pooled) : false
    if (claimed && ready) return
    const at = this.#now()
    const list = this.#pressure.get(roleId) ?? []
    list.push(at)
    this.#pressure.set(roleId, list)
    await this.#t.notePoolDemand(roleId, at)
  }

  /** The role's pressure events inside the window, from every replica (the shared rows). */
  async #refreshPressure(roleId: string): Promise<void> {
    const since = this.#now() - (this.#o.poolDemandWindowMs ?? DEFAULT_POOL_DEMAND_WINDOW_MS)
    const events = await this.#t.poolDemandSince(roleId, since)
    if (events.length) this.#pressure.set(roleId, events)
    else this.#pressure.delete(roleId)
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
