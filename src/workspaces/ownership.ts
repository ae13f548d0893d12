// Which replica acts on a workspace (docs/workspaces.md "Replicas and leases"). On PostgreSQL each
// live workspace (provisioning, idle, busy, stopping; warm-pool members too) is owned by one
// replica through a lease row that the replica's heartbeat renews (src/store/replica-leases.ts).
// A reconcile step first claims the lease: the owner acts, any other replica leaves the workspace
// alone and, when it wrote a change the owner must act on (a follow-up task, a cancel, a stop),
// nudges the owner (NOTIFY on WORKSPACE_KICK_CHANNEL). A lease past its expiry (the owner stopped
// beating: kill -9, host gone) is claimed by the first replica that reconciles the workspace —
// every replica looks for expired leases after each of its heartbeats — and the claim says whose
// it was, so the reconcile step takes the workspace over. A stopped workspace needs no owner: its
// lease is released. On SQLite (one process) `SOLO_OWNERSHIP` owns everything.
import type { Logger } from 'pino'
import { WORKSPACE_KICK_CHANNEL, type ReplicaLeases, type Store } from '../store/index.js'

/** This process as a replica, as serve hands it in (src/serve/replica.ts). */
export interface ReplicaSeat {
  readonly id: string
  readonly ttlMs: number
  readonly leases: ReplicaLeases
  /** Called after every heartbeat with the workspaces whose lease the replica still holds. */
  onBeat(cb: (held: readonly string[]) => void): () => void
}

/** `takeover`: the replica whose expired lease this claim replaced (its workspace is taken over). */
export type Claim = { owned: true; takeover: string | null } | { owned: false; owner: string }

export interface OwnershipHooks {
  /** Reconcile the workspace here (a nudge from another replica, or an expired lease to take over). */
  kick(workspaceId: string): void
  /** This replica lost the lease (it missed its heartbeats and another replica took over): let go locally. */
  lost(workspaceId: string): void
}

export interface Ownership {
  readonly replicaId: string | undefined
  claim(workspaceId: string): Promise<Claim>
  release(workspaceId: string): Promise<void>
  /** Asks the owner (whoever holds the lease) to reconcile the workspace. */
  nudge(workspaceId: string): Promise<void>
  /** The ids among `ids` that a live lease of another replica covers (a reconcile pass skips them). */
  ownedElsewhere(ids: readonly string[]): Promise<Set<string>>
  start(hooks: OwnershipHooks): Promise<void>
  close(): Promise<void>
}

/** One process owns every workspace (SQLite; the lifecycle's tests). */
export const SOLO_OWNERSHIP: Ownership = {
  replicaId: undefined,
  claim: async () => ({ owned: true, takeover: null }),
  release: async () => {},
  nudge: async () => {},
  ownedElsewhere: async () => new Set(),
  start: async () => {},
  close: async () => {},
}

export class LeaseOwnership implements Ownership {
  readonly #store: Store
  readonly #seat: ReplicaSeat
  readonly #logger: Logger | undefined
  /** Leases this replica holds, as of its last heartbeat (or claim since). */
  readonly #owned = new Set<string>()
  #lastBeat = Date.now()
  #unlisten: (() => Promise<void>) | undefined
  #offBeat: (() => void) | undefined

  constructor(store: Store, seat: ReplicaSeat, logger?: Logger) {
    this.#store = store
    this.#seat = seat
    this.#logger = logger
  }

  get replicaId(): string {
    return this.#seat.id
  }

  async claim(workspaceId: string): Promise<Claim> {
    // A lease renewed by a recent heartbeat is ours without asking; after missed beats, ask.
    if (this.#owned.has(workspaceId) && Date.now() - this.#lastBeat < this.#seat.ttlMs / 2) return { owned: true, takeover: null }
    const r = await this.#seat.leases.acquire(workspaceId, this.#seat.id, this.#seat.ttlMs)
    if (!r.acquired) {
      this.#owned.delete(workspaceId)
      return { owned: false, owner: r.owner }
    }
    this.#owned.add(workspaceId)
    return { owned: true, takeover: r.previousOwner }
  }

  async release(workspaceId: string): Promise<void> {
    this.#owned.delete(workspaceId)
    await this.#seat.leases.release(workspaceId, this.#seat.id)
  }

  async nudge(workspaceId: string): Promise<void> {
    await this.#store.notify(WORKSPACE_KICK_CHANNEL, workspaceId)
  }

  async ownedElsewhere(ids: readonly string[]): Promise<Set<string>> {
    const owners = await this.#seat.leases.liveOwners(ids.filter((id) => !this.#owned.has(id)))
    return new Set([...owners].filter(([, owner]) => owner !== this.#seat.id).map(([id]) => id))
  }

  async start(hooks: OwnershipHooks): Promise<void> {
    this.#unlisten = await this.#store.listen(WORKSPACE_KICK_CHANNEL, (id) => {
      if (this.#owned.has(id)) hooks.kick(id)
    })
    this.#offBeat = this.#seat.onBeat((held) => {
      this.#lastBeat = Date.now()
      const still = new Set(held)
      for (const id of [...this.#owned]) {
        if (still.has(id)) continue
        this.#owned.delete(id)
        this.#logger?.warn({ workspace_id: id }, 'this replica lost a workspace lease (missed heartbeats); another replica owns it now')
        hooks.lost(id)
      }
      for (const id of held) this.#owned.add(id)
      void this.#seat.leases.expired().then(
        (expired) => { for (const e of expired) hooks.kick(e.workspaceId) },
        (err: unknown) => this.#logger?.warn({ err }, 'looking for expired workspace leases failed'),
      )
    })
  }

  async close(): Promise<void> {
    this.#offBeat?.()
    await this.#unlisten?.()
  }
}
