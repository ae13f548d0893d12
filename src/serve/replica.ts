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
// either has no registry refuses to start with one line saying why. The lock lives on a connection
// of its own; when that connection drops (a database restart, pg_terminate_backend) the replica
// takes the lock again, and when another replica took it meanwhile in a conflicting mode, this one
// stops serving with one error line (`onFatal`).
//
// Dead replicas' rows are reaped: every REAP_EVERY_BEATS heartbeats a replica deletes the rows of
// replicas without a heartbeat for REAP_AFTER_TTLS lease TTLs (src/store/replica-leases.ts
// `reapDead`; their expired workspace leases stay until a live replica takes the workspaces over).
import { randomBytes } from 'node:crypto'
import { hostname } from 'node:os'
import type { Logger } from 'pino'
import { replicaLeases, type ReplicaInfo, type ReplicaLeases, type Store } from '../store/index.js'

const REPLICAS_LOCK = 'corral_replicas'
/** A replica row without a heartbeat for this many lease TTLs is deleted (docs/reliability.md "Replicas"). */
export const REAP_AFTER_TTLS = 10
/** How often (in heartbeats, three per TTL) a replica reaps dead rows and re-asserts its own. */
const REAP_EVERY_BEATS = 10
/** Backoff bounds while the advisory lock's connection cannot be made again. */
const RELOCK_MIN_MS = 200
const RELOCK_MAX_MS = 5_000

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
  /** Called (once) when this replica must stop serving: its start-up lock was taken by a replica that conflicts with it. */
  onFatal(cb: (reason: string) => void): void
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
  if (!o.store.capabilities.sharedAcrossHosts) return soloReplica(id, o.ttlMs)
  const fatal = new FatalSignal(o.logger)
  const lock = o.proxyOnly ? undefined : await StartupLock.take(o.store, o.sharedStores, o.logger, (reason) => fatal.raise(reason))
  const leases = replicaLeases(o.store)
  const info = { id, host: hostname(), dataDir: o.dataDir, kind: o.proxyOnly ? 'proxy' as const : 'serve' as const }
  const beats = new Set<(held: readonly string[]) => void>()
  let urls: { apiUrl?: string; proxyUrl?: string } = {}
  try {
    await leases.register(info, o.ttlMs)
    // An earlier life of this replica (same host and data dir, killed before it deregistered)
    // is dead: its workspaces are taken over now rather than after its leases expire.
    if (!o.proxyOnly) {
      const dead = await leases.expirePredecessors(info)
      if (dead.length) o.logger.warn({ replicas: dead }, 'an earlier replica on this data dir did not shut down cleanly; taking its workspaces over')
    }
  } catch (err) {
    await lock?.release()
    throw err
  }
  let beating: Promise<void> = Promise.resolve()
  let count = 0
  const beat = () => {
    beating = beating.then(async () => {
      try {
        const held = await leases.heartbeat(id, o.ttlMs)
        for (const cb of beats) cb(held)
        if (++count % REAP_EVERY_BEATS === 0) await reap(leases, { ...info, ...urls }, o)
      } catch (err) {
        o.logger.warn({ err }, 'replica heartbeat failed (leases expire if the database stays unreachable)')
      }
    })
  }
  // Three beats per TTL: one late beat never costs a lease.
  let timer: NodeJS.Timeout | undefined = setInterval(beat, Math.max(100, Math.floor(o.ttlMs / 3)))
  timer.unref()
  return {
    id, ttlMs: o.ttlMs, leases,
    onBeat(cb) {
      beats.add(cb)
      return () => void beats.delete(cb)
    },
    async listening(u) {
      urls = u
      await leases.register({ ...info, ...u }, o.ttlMs)
    },
    async stop() {
      if (timer) clearInterval(timer)
      timer = undefined
      await beating
      await leases.deregister(id).catch((err: unknown) => o.logger.warn({ err }, 'replica deregistration failed; its leases expire after the TTL'))
      await lock?.release()
    },
    onFatal: (cb) => fatal.on(cb),
  }
}

/** Deletes dead replicas' rows and re-asserts this replica's own (a row reaped while this one was cut off). */
async function reap(leases: ReplicaLeases, self: ReplicaInfo, o: ReplicaOptions): Promise<void> {
  const reaped = await leases.reapDead(REAP_AFTER_TTLS * o.ttlMs)
  if (reaped.length) o.logger.info({ replicas: reaped }, 'removed the rows of replicas dead for longer than the reaping horizon')
  await leases.register(self, o.ttlMs)
}

/** One fatal reason, delivered to the listener once (or logged when nobody listens yet). */
class FatalSignal {
  #cb: ((reason: string) => void) | undefined
  #reason: string | undefined
  constructor(private readonly logger: Logger) {}
  raise(reason: string): void {
    if (this.#reason !== undefined) return
    this.#reason = reason
    this.logger.error({}, reason)
    this.#cb?.(reason)
  }
  on(cb: (reason: string) => void): void {
    this.#cb = cb
    if (this.#reason !== undefined) cb(this.#reason)
  }
}

function soloReplica(id: string, ttlMs: number): Replica {
  return { id, ttlMs, leases: undefined, onBeat: () => () => {}, listening: async () => {}, stop: async () => {}, onFatal: () => {} }
}

const refusal = (shared: boolean) => shared
  ? 'another corral serve runs on this database with snapshots and packs on its local disk (no CORRAL_PACK_REGISTRY): stop it or give every replica the same registry, then start this one'
  : 'another corral serve already runs on this database: several replicas need shared snapshots and packs, so set CORRAL_PACK_REGISTRY (the same registry) on every replica'

/**
 * The start-up rule's advisory lock, held for the replica's life and taken again when its
 * connection drops: retried with backoff while the database cannot be reached; refused (another
 * replica took it in a conflicting mode meanwhile) → `fatal`.
 */
class StartupLock {
  #release: (() => Promise<void>) | undefined
  #closed = false
  #retry: NodeJS.Timeout | undefined

  private constructor(private readonly store: Store, private readonly shared: boolean, private readonly logger: Logger, private readonly fatal: (reason: string) => void) {}

  static async take(store: Store, shared: boolean, logger: Logger, fatal: (reason: string) => void): Promise<StartupLock> {
    const lock = new StartupLock(store, shared, logger, fatal)
    if (!(await lock.#hold())) throw new ReplicaStartError(refusal(shared))
    return lock
  }

  async #hold(): Promise<boolean> {
    const release = await this.store.holdLock(REPLICAS_LOCK, this.shared ? 'shared' : 'exclusive', (err) => this.#lost(err))
    if (!release) return false
    if (this.#closed) await release()
    else this.#release = release
    return true
  }

  #lost(err: Error | undefined): void {
    this.#release = undefined
    if (this.#closed) return
    this.logger.warn({ err }, 'the replicas advisory lock\'s database connection dropped; taking the lock again')
    this.#again(RELOCK_MIN_MS)
  }

  #again(delayMs: number): void {
    this.#retry = setTimeout(() => {
      this.#retry = undefined
      if (this.#closed) return
      this.#hold().then(
        (ok) => {
          if (ok) this.logger.info({}, 'the replicas advisory lock is held again')
          else this.fatal(`this replica lost its start-up lock and another replica took it meanwhile: ${refusal(this.shared)}; stopping`)
        },
        (e: unknown) => {
          this.logger.warn({ err: e }, 'taking the replicas advisory lock again failed; retrying')
          this.#again(Math.min(RELOCK_MAX_MS, delayMs * 2))
        },
      )
    }, delayMs)
    this.#retry.unref()
  }

  async release(): Promise<void> {
    this.#closed = true
    if (this.#retry) clearTimeout(this.#retry)
    await this.#release?.()
    this.#release = undefined
  }
}

/** A start refused by the replica rule: one line, no stack (src/cli/start-errors.ts prints it as is). */
export class ReplicaStartError extends Error {
  override readonly name = 'ReplicaStartError'
}

/** The default lease TTL: a dead replica's workspaces are taken over within this (plus one reconcile pass). */
export const DEFAULT_LEASE_TTL_SECONDS = 15

/** CORRAL_LEASE_TTL / --lease-ttl (seconds) in milliseconds. */
export function leaseTtlMs(raw: string | undefined): number {
  const value = raw === undefined || raw.trim() === '' ? DEFAULT_LEASE_TTL_SECONDS : Number(raw)
  if (!Number.isFinite(value) || value < 0.5 || value > 300) throw new Error(`--lease-ttl (CORRAL_LEASE_TTL) must be a number of seconds from 0.5 to 300, got ${JSON.stringify(raw)}`)
  return Math.round(value * 1000)
}
