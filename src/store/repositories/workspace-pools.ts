// Counts and sets of a role's workspaces, and the warm pools' members, claims and shared pressure
// (docs/workspaces.md "Warm pools", "Warm pools across replicas"). Membership is the workspace row
// (`pooled = 1`); a claim is one guarded row update, on PostgreSQL picking the oldest idle member
// that no concurrent claim has locked (FOR UPDATE SKIP LOCKED), so parallel claims through any
// replicas each get a distinct member while any is left. `lockPool` serialises the fill of one
// role's pool across replicas (a transaction-scoped advisory lock on PostgreSQL; SQLite has one
// writer). `pool_demand` holds a dynamic pool's pressure events for every replica.
import { sql, type Kysely } from 'kysely'
import { nowIso } from '../../contract/index.js'

type Row = Record<string, any>
export interface PoolClaimer { created_by: string; created_by_user_id: string; environment?: string }

// long-function: one object literal of short methods over the workspaces and pool_demand tables
export function poolRows(db: Kysely<any>, rowLocks: boolean) {
  const claimSet = (owner: PoolClaimer) => {
    const now = nowIso()
    return { pooled: 0, created_by: owner.created_by, created_by_user_id: owner.created_by_user_id, environment: owner.environment ?? null, updated_at: now, last_activity_at: now }
  }
  return {
    async activeCountForRoles(orgId: string, roleIds: readonly string[]): Promise<number> {
      if (roleIds.length === 0) return 0
      const r = await db.selectFrom('workspaces').select((eb: any) => eb.fn.countAll().as('n'))
        .where('org_id', '=', orgId).where('role_id', 'in', roleIds).where('pooled', '=', 0)
        .where('state', 'in', ['provisioning', 'idle', 'busy', 'stopping']).executeTakeFirst()
      return Number((r as Row | undefined)?.n ?? 0)
    },

    /** `pooled: false` leaves out unclaimed warm-pool members (they belong to the pool, not to a user). */
    async idsForRole(orgId: string, roleId: string, states: readonly string[], opts: { pooled?: boolean } = {}): Promise<string[]> {
      let q = db.selectFrom('workspaces').select('id').where('org_id', '=', orgId).where('role_id', '=', roleId).where('state', 'in', states)
      if (opts.pooled === false) q = q.where('pooled', '=', 0)
      const rows = await q.execute()
      return rows.map((r: Row) => r.id as string)
    },

    /**
     * Roles with a warm pool to keep filled (role and provider not archived): `static` with
     * pool_size > 0, and `dynamic` with room to grow (pool_size or pool_max_size > 0) — a dynamic
     * pool of size 0 still grows with claim pressure and must be visited to shrink back to 0.
     */
    async pooledRoles(): Promise<Array<{ org_id: string; role_id: string; pool_size: number }>> {
      const rows = await db.selectFrom('agent_roles as r').innerJoin('providers as p', 'p.id', 'r.provider_id')
        .select(['r.org_id', 'r.id as role_id', 'r.pool_size'])
        .where((eb: any) => eb.or([
          eb.and([eb('r.pool_policy', '=', 'static'), eb('r.pool_size', '>', 0)]),
          eb.and([eb('r.pool_policy', '=', 'dynamic'), eb.or([eb('r.pool_size', '>', 0), eb('r.pool_max_size', '>', 0)])]),
        ]))
        .where('r.archived_at', 'is', null).where('p.archived_at', 'is', null)
        .execute()
      return rows.map((r: Row) => ({ org_id: r.org_id, role_id: r.role_id, pool_size: Number(r.pool_size ?? 0) }))
    },

    /**
     * Inside a transaction: holds the role's pool until it commits, so a count and the creates
     * that follow it are one step for every replica (PostgreSQL advisory transaction lock).
     */
    async lockPool(roleId: string): Promise<void> {
      if (rowLocks) await sql`SELECT pg_advisory_xact_lock(hashtext(${`corral_pool:${roleId}`}))`.execute(db)
    },

    /** Unclaimed pool members of a role that are (or are becoming) ready. */
    async poolCount(roleId: string): Promise<number> {
      const r = await db.selectFrom('workspaces').select((eb: any) => eb.fn.countAll().as('n'))
        .where('role_id', '=', roleId).where('pooled', '=', 1).where('state', 'in', ['provisioning', 'idle']).executeTakeFirst()
      return Number((r as Row | undefined)?.n ?? 0)
    },

    /**
     * Claims the oldest idle pool member of the role for a caller; undefined when none is ready.
     * Members made in the same millisecond are told apart by id (UUIDv7: creation order in this
     * process), so the pick is deterministic and matches the shrink's "oldest first". The
     * `pooled = 1` guard makes a concurrent second claim of the same row update nothing. On
     * PostgreSQL a locked member is first skipped; when every idle member is locked the guarded
     * claims below wait for the locks, since a row can be held by a writer that is not a claim (a
     * reconcile or a warm-up updating the member): skipping those would make a new workspace while
     * a ready member is there. A member a concurrent claim took fails the guard after the wait.
     */
    async claimPooled(orgId: string, roleId: string, owner: PoolClaimer): Promise<string | undefined> {
      const idle = () => db.selectFrom('workspaces').select('id').where('org_id', '=', orgId).where('role_id', '=', roleId)
        .where('pooled', '=', 1).where('state', '=', 'idle').orderBy('created_at').orderBy('id')
      if (rowLocks) {
        const r = await db.updateTable('workspaces').set(claimSet(owner))
          .where('id', '=', (eb: any) => idle().limit(1).forUpdate().skipLocked())
          .where('pooled', '=', 1).where('state', '=', 'idle').returning('id').executeTakeFirst()
        if (r) return (r as Row).id as string
      }
      for (const { id } of (await idle().limit(3).execute()) as Row[]) {
        if (await this.claimPooledId(id as string, owner)) return id as string
      }
      return undefined
    },

    /** Claims one given idle member (the dynamic shrink's pick); false when a task claimed it first. */
    async claimPooledId(id: string, owner: PoolClaimer): Promise<boolean> {
      const r = await db.updateTable('workspaces').set(claimSet(owner))
        .where('id', '=', id).where('pooled', '=', 1).where('state', '=', 'idle').executeTakeFirst()
      return Number(r.numUpdatedRows) > 0
    },

    /** Records one pressure event of a dynamic pool (epoch ms of the caller's clock). */
    async notePoolDemand(roleId: string, at: number): Promise<void> {
      await db.insertInto('pool_demand').values({ role_id: roleId, at }).execute()
    },

    /** The role's pressure events after `since` (every replica's), oldest first; older ones are deleted. */
    async poolDemandSince(roleId: string, since: number): Promise<number[]> {
      await db.deleteFrom('pool_demand').where('role_id', '=', roleId).where('at', '<=', since).execute()
      const rows = await db.selectFrom('pool_demand').select('at').where('role_id', '=', roleId).where('at', '>', since).orderBy('at').execute()
      return rows.map((r: Row) => Number(r.at))
    },
  }
}
