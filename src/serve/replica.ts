// This process as a replica (docs/reliability.md "Replicas"): an id generated at start, a row in
// `replicas` with a heartbeat that also renews the workspace leases and `max_concurrent` permits
// the replica holds (src/store/replica-leases.ts), and the start-up rule for several replicas on
// one database. On SQLite there is one process and no replica row: the lifecycle owns every
// workspace, as it always did.
//
// Start-up rule (PostgreSQL): snapshots and pack trees are on local disk unless a registry is
// configured (CORRAL_PACK_REGISTRY), and a replica cannot restore, fork or mount what is on another
// replica's disk. So a replica without a registry holds an exclusive advisory lock on the database
// for its whole life, and a replica with one holds the same lock shared: a second replica where
// either has no registry refuses to start with one line saying why.
import { randomBytes } from 'node:crypto'
import { hostname } from 'node:os'
import type { Logger } from 'pino'
import { replicaLeases, type ReplicaLeases, type Store } from '../store/index.js'

const REPLICAS_LOCK = 'corral_replicas'

export interface Replica {
  readonly id: string
  readonly ttlMs: number
  /** The leases table (PostgreSQL); undefined on SQLite, where this process is the only one. */
  readonly leases: ReplicaLeases | undefined
  /** Called after every heartbeat with the workspaces whose lease this replica still holds. */
  onBeat(cb: (held: readonly string[]) => void): () => void
  /** Records where this replica listens (operators read `replicas`). */
  listening(urls: { apiUrl?: string; proxyUrl?: string }): Promise<void>
  /** Stops beating and deregisters: its leases and permits are free at once. */
  stop(): Promise<void>
}

export interface ReplicaOptions {
  store: Store
  logger: Logger
  dataDir: string
  ttlMs: number
  /** Snapshots and packs are shared through a registry (several replicas allowed). */
  sharedStores: boolean
  /** `corral proxy` alone: a row and a heartbeat (for its permits), no start-up rule. */
  proxyOnly?: boolean
}

export function newReplicaId(): string {
  return `rep_${randomBytes(8).toString('hex')}`
}

export async function startReplica(o: ReplicaOptions): Promise<Replica> {
  const id = newReplicaId()
  if (o.store.dialect !== 'postgres') return soloReplica(id, o.ttlMs)
  const unlock = o.proxyOnly ? async () => {} : await startupLock(o.store, o.sharedStores)
  const leases = replicaLeases(o.store)
  const info = { id, host: hostname(), dataDir: o.dataDir }
  const beats = new Set<(held: readonly string[]) => void>()
  let timer: NodeJS.Timeout | undefined
  try {
    await leases.register(info, o.ttlMs)
    // An earlier life of this replica (same host and data dir, killed before it deregistered)
    // is dead: its workspaces are taken over now rather than after its leases expire.
    if (!o.proxyOnly) {
      const dead = await leases.expirePredecessors(info)
      if (dead.length) o.logger.warn({ replicas: dead }, 'an earlier replica on this data dir did not shut down cleanly; taking its workspaces over')
    }
  } catch (err) {
    await unlock()
    throw err
  }
  let beating: Promise<void> = Promise.resolve()
  const beat = () => {
    beating = beating.then(async () => {
      try {
        const held = await leases.heartbeat(id, o.ttlMs)
        for (const cb of beats) cb(held)
      } catch (err) {
        o.logger.warn({ err }, 'replica heartbeat failed (leases expire if the database stays unreachable)')
      }
    })
  }
  // Three beats per TTL: one late beat never costs a lease.
  timer = setInterval(beat, Math.max(100, Math.floor(o.ttlMs / 3)))
  timer.unref()
  return {
    id, ttlMs: o.ttlMs, leases,
    onBeat(cb) {
      beats.add(cb)
      return () => void beats.delete(cb)
    },
    async listening(urls) {
      await leases.register({ ...info, ...urls }, o.ttlMs)
    },
    async stop() {
      if (timer) clearInterval(timer)
      timer = undefined
      await beating
      await leases.deregister(id).catch((err: unknown) => o.logger.warn({ err }, 'replica deregistration failed; its leases expire after the TTL'))
      await unlock()
    },
  }
}

function soloReplica(id: string, ttlMs: number): Replica {
  return { id, ttlMs, leases: undefined, onBeat: () => () => {}, listening: async () => {}, stop: async () => {} }
}

async function startupLock(store: Store, shared: boolean): Promise<() => Promise<void>> {
  const release = await store.holdLock(REPLICAS_LOCK, shared ? 'shared' : 'exclusive')
  if (release) return release
  throw new ReplicaStartError(shared
    ? 'another corral serve runs on this database with snapshots and packs on its local disk (no CORRAL_PACK_REGISTRY): stop it or give every replica the same registry, then start this one'
    : 'another corral serve already runs on this database: several replicas need shared snapshots and packs, so set CORRAL_PACK_REGISTRY (the same registry) on every replica')
}

/** A start refused by the replica rule: one line, no stack (src/cli/start-errors.ts prints it as is). */
export class ReplicaStartError extends Error {
  override readonly name = 'ReplicaStartError'
}
