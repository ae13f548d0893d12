// Replicas, workspace leases and concurrency permits (docs/workspaces.md "Replicas and leases").
// A replica registers a row with a heartbeat; each live workspace is owned by one replica through
// a lease (owner + expiry). The owner's heartbeat renews its replica row, every lease it owns and
// every `max_concurrent` permit it holds in one transaction, so a replica that stops beating
// (kill -9, host gone) loses all three together once the TTL has passed, and another replica can
// take the workspaces over. Times are epoch milliseconds of the caller's clock (replicas' clocks
// should be NTP-synchronised; a skew eats into the TTL). Every operation runs its own transaction.
import { sql, type Kysely, type Transaction } from 'kysely'
import { nowIso } from '../contract/index.js'
import type { DialectCapabilities } from './dialects/types.js'

type Num = number | string | bigint
export interface ReplicasTable {
  id: string; host: string; data_dir: string; api_url: string | null; proxy_url: string | null
  started_at: string; heartbeat_at: Num; expires_at: Num; kind: string
}
export interface WorkspaceLeasesTable { workspace_id: string; owner: string; expires_at: Num; acquired_at: string }
export interface ConcurrencyPermitsTable { key: string; holder: string; count: number; expires_at: Num }
interface Db { replicas: ReplicasTable; workspace_leases: WorkspaceLeasesTable; concurrency_permits: ConcurrencyPermitsTable }

export interface ReplicaInfo {
  id: string
  host: string
  dataDir: string
  /** `serve` (default) or `proxy` (a `corral proxy` process: permits only, no workspaces). */
  kind?: 'serve' | 'proxy'
  apiUrl?: string
  proxyUrl?: string
}

export interface LiveReplica extends ReplicaInfo {
  startedAt: string
  heartbeatAt: number
  expiresAt: number
}

export type LeaseResult =
  /** `previousOwner`: the replica whose expired lease this one replaced (a takeover), else null. */
  | { acquired: true; previousOwner: string | null }
  | { acquired: false; owner: string; expiresAt: number }

/** Over a store (its Kysely handle and whether the dialect locks rows); each call runs its own transaction. */
// long-function: one object literal of short methods over the replicas and leases tables, sharing `db` and `leaseRow`
export function replicaLeases(store: { readonly db: Kysely<any>; readonly capabilities: Pick<DialectCapabilities, 'rowLocks'> }) {
  const db = store.db as unknown as Kysely<Db>
  const pg = store.capabilities.rowLocks

  async function leaseRow(trx: Transaction<Db>, workspaceId: string) {
    let q = trx.selectFrom('workspace_leases').select(['owner', 'expires_at']).where('workspace_id', '=', workspaceId)
    if (pg) q = q.forUpdate()
    const row = await q.executeTakeFirst()
    return row ? { owner: row.owner, expiresAt: Number(row.expires_at) } : undefined
  }

  return {
    /** Registers (or re-registers) a replica, alive for `ttlMs`. */
    async register(r: ReplicaInfo, ttlMs: number, now = Date.now()): Promise<void> {
      const row = {
        id: r.id, host: r.host, data_dir: r.dataDir, api_url: r.apiUrl ?? null, proxy_url: r.proxyUrl ?? null,
        started_at: nowIso(), heartbeat_at: now, expires_at: now + ttlMs, kind: r.kind ?? 'serve',
      }
      await db.insertInto('replicas').values(row)
        .onConflict((oc) => oc.column('id').doUpdateSet({ api_url: row.api_url, proxy_url: row.proxy_url, heartbeat_at: now, expires_at: now + ttlMs }))
        .execute()
    },

    /**
     * One heartbeat: the replica row, its leases and its permits live until `now + ttlMs`.
     * Returns the workspaces whose lease it still holds (a lease another replica took after this
     * one missed its beats is not among them: the caller must let go of those).
     */
    async heartbeat(id: string, ttlMs: number, now = Date.now()): Promise<string[]> {
      return db.transaction().execute(async (trx) => {
        const until = now + ttlMs
        await trx.updateTable('replicas').set({ heartbeat_at: now, expires_at: until }).where('id', '=', id).execute()
        await trx.updateTable('concurrency_permits').set({ expires_at: until }).where('holder', '=', id).execute()
        await trx.updateTable('workspace_leases').set({ expires_at: until }).where('owner', '=', id).execute()
        const rows = await trx.selectFrom('workspace_leases').select('workspace_id').where('owner', '=', id).execute()
        return rows.map((r) => r.workspace_id)
      })
    },

    /** A clean shutdown: the replica's row, leases and permits go at once (no TTL to wait out). */
    async deregister(id: string): Promise<void> {
      await db.transaction().execute(async (trx) => {
        await trx.deleteFrom('workspace_leases').where('owner', '=', id).execute()
        await trx.deleteFrom('concurrency_permits').where('holder', '=', id).execute()
        await trx.deleteFrom('replicas').where('id', '=', id).execute()
      })
    },

    /**
     * Replicas that ran on the same host with the same data dir (an earlier life of this one,
     * killed before it could deregister) are dead now: their leases and permits expire at once.
     */
    async expirePredecessors(self: ReplicaInfo): Promise<string[]> {
      return db.transaction().execute(async (trx) => {
        // Only serve rows: a `corral proxy` beside this serve on the same data dir is alive.
        const rows = await trx.selectFrom('replicas').select('id').where('kind', '=', 'serve')
          .where('host', '=', self.host).where('data_dir', '=', self.dataDir).where('id', '!=', self.id).execute()
        const ids = rows.map((r) => r.id)
        if (ids.length === 0) return []
        await trx.updateTable('workspace_leases').set({ expires_at: 0 }).where('owner', 'in', ids).execute()
        await trx.deleteFrom('concurrency_permits').where('holder', 'in', ids).execute()
        await trx.deleteFrom('replicas').where('id', 'in', ids).execute()
        return ids
      })
    },

    /**
     * Deletes the rows of replicas dead for longer than `horizonMs` (no heartbeat since) and the
     * permits of holders without a live row that expired as long ago. Their workspace leases stay:
     * an expired lease is how the workspace is found and taken over (`expired`). Returns the ids.
     */
    async reapDead(horizonMs: number, now = Date.now()): Promise<string[]> {
      const before = now - horizonMs
      return db.transaction().execute(async (trx) => {
        const rows = await trx.selectFrom('replicas').select('id').where('expires_at', '<', before).execute()
        const ids = rows.map((r) => r.id)
        if (ids.length) await trx.deleteFrom('replicas').where('id', 'in', ids).execute()
        await trx.deleteFrom('concurrency_permits').where('expires_at', '<', before).execute()
        return ids
      })
    },

    /** Takes the workspace's lease when it is free, expired or already ours (then renewed). */
    async acquire(workspaceId: string, owner: string, ttlMs: number, now = Date.now()): Promise<LeaseResult> {
      return db.transaction().execute(async (trx) => {
        const before = await leaseRow(trx, workspaceId)
        if (before && before.owner !== owner && before.expiresAt >= now) return { acquired: false, owner: before.owner, expiresAt: before.expiresAt }
        const r = await trx.insertInto('workspace_leases')
          .values({ workspace_id: workspaceId, owner, expires_at: now + ttlMs, acquired_at: nowIso() })
          .onConflict((oc) => oc.column('workspace_id')
            .doUpdateSet({ owner, expires_at: now + ttlMs })
            .where((eb) => eb.or([eb('workspace_leases.owner', '=', owner), eb('workspace_leases.expires_at', '<', now)])))
          .executeTakeFirst()
        if (Number(r.numInsertedOrUpdatedRows ?? 0) === 0) {
          const held = await leaseRow(trx, workspaceId)
          return { acquired: false, owner: held?.owner ?? '', expiresAt: held?.expiresAt ?? 0 }
        }
        return { acquired: true, previousOwner: before && before.owner !== owner ? before.owner : null }
      })
    },

    /** Lets go of a lease this replica holds (a stopped workspace needs no owner). */
    async release(workspaceId: string, owner: string): Promise<void> {
      await db.deleteFrom('workspace_leases').where('workspace_id', '=', workspaceId).where('owner', '=', owner).execute()
    },

    /** The live owner of a workspace, if any. */
    async owner(workspaceId: string, now = Date.now()): Promise<{ owner: string; expiresAt: number } | undefined> {
      const row = await db.selectFrom('workspace_leases').select(['owner', 'expires_at']).where('workspace_id', '=', workspaceId).executeTakeFirst()
      if (!row || Number(row.expires_at) < now) return undefined
      return { owner: row.owner, expiresAt: Number(row.expires_at) }
    },

    /** The live owners of the leases among `ids` (one query): workspace id → owner. */
    async liveOwners(ids: readonly string[], now = Date.now()): Promise<Map<string, string>> {
      if (ids.length === 0) return new Map()
      const rows = await db.selectFrom('workspace_leases').select(['workspace_id', 'owner']).where('workspace_id', 'in', [...ids]).where('expires_at', '>=', now).execute()
      return new Map(rows.map((r) => [r.workspace_id, r.owner]))
    },

    /** Leases past their expiry: workspaces whose owner stopped beating. */
    async expired(now = Date.now(), limit = 500): Promise<{ workspaceId: string; owner: string }[]> {
      const rows = await db.selectFrom('workspace_leases').select(['workspace_id', 'owner']).where('expires_at', '<', now).limit(limit).execute()
      return rows.map((r) => ({ workspaceId: r.workspace_id, owner: r.owner }))
    },

    async liveReplicas(now = Date.now()): Promise<LiveReplica[]> {
      const rows = await db.selectFrom('replicas').selectAll().where('expires_at', '>=', now).orderBy('started_at').execute()
      return rows.map((r) => ({
        id: r.id, host: r.host, dataDir: r.data_dir, kind: r.kind === 'proxy' ? 'proxy' as const : 'serve' as const, ...(r.api_url ? { apiUrl: r.api_url } : {}), ...(r.proxy_url ? { proxyUrl: r.proxy_url } : {}),
        startedAt: r.started_at, heartbeatAt: Number(r.heartbeat_at), expiresAt: Number(r.expires_at),
      }))
    },
  }
}

export type ReplicaLeases = ReturnType<typeof replicaLeases>

/** `max_concurrent` permits per key and holder (the proxy's budgets); each call runs its own transaction. */
export function concurrencyPermits(store: { readonly db: Kysely<any>; readonly capabilities: Pick<DialectCapabilities, 'rowLocks'> }) {
  const db = store.db as unknown as Kysely<Db>
  const pg = store.capabilities.rowLocks
  return {
    /**
     * Takes up to `want` `max_concurrent` permits of `key` for `holder`: what live holders (and this
     * one) hold together never passes `max`. Returns how many were granted (0: none left).
     */
    async takePermits(key: string, holder: string, max: number, want: number, ttlMs: number, now = Date.now()): Promise<number> {
      return db.transaction().execute(async (trx) => {
        // One writer per key at a time; rows of other holders may be absent, so lock the key itself.
        if (pg) await sql`SELECT pg_advisory_xact_lock(hashtext(${`corral_permits:${key}`}))`.execute(trx)
        const rows = await trx.selectFrom('concurrency_permits').select(['holder', 'count', 'expires_at']).where('key', '=', key).execute()
        const held = rows.reduce((n, r) => n + (r.holder === holder || Number(r.expires_at) >= now ? Number(r.count) : 0), 0)
        const granted = Math.max(0, Math.min(want, max - held))
        if (granted === 0) return 0
        await trx.insertInto('concurrency_permits').values({ key, holder, count: granted, expires_at: now + ttlMs })
          .onConflict((oc) => oc.columns(['key', 'holder']).doUpdateSet({ count: sql`concurrency_permits.count + ${granted}`, expires_at: now + ttlMs }))
          .execute()
        return granted
      })
    },

    /** Gives `n` permits of `key` back. */
    async returnPermits(key: string, holder: string, n: number): Promise<void> {
      if (n <= 0) return
      await db.transaction().execute(async (trx) => {
        if (pg) await sql`SELECT pg_advisory_xact_lock(hashtext(${`corral_permits:${key}`}))`.execute(trx)
        await trx.updateTable('concurrency_permits').set({ count: sql`CASE WHEN count > ${n} THEN count - ${n} ELSE 0 END` })
          .where('key', '=', key).where('holder', '=', holder).execute()
        await trx.deleteFrom('concurrency_permits').where('key', '=', key).where('holder', '=', holder).where('count', '<=', 0).execute()
      })
    },
  }
}

export type ConcurrencyPermits = ReturnType<typeof concurrencyPermits>
