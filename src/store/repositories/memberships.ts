// Memberships of users in orgs. Last-owner protection is enforced inside the statement that
// changes the row, so two admins demoting the last two owners at once cannot both succeed: SQLite
// serialises writers, and on Postgres the change runs in a transaction holding the org row lock.

import { sql, type Kysely } from 'kysely'
import { newId, nowIso, type MembershipRole, type MembershipStatus } from '../../contract/index.js'
import type { Database } from '../schema.js'
import { compact, type RepoContext } from './context.js'
import { normalizeEmail } from './users.js'

export interface Membership {
  org_id: string
  user_id: string
  email: string
  role: MembershipRole
  status: MembershipStatus
  invitation_id: string
  invited_by?: string
  created_at: string
  accepted_at?: string
  first_seen_at?: string
}

export type GuardedChange =
  | { ok: true; membership: Membership; from_role: MembershipRole }
  | { ok: false; reason: 'not_found' | 'last_owner' }

// long-function: a repository: one closure over the database handle; each method is a short query and reads alone.
export function createMembershipsRepository({ db, dialect }: RepoContext) {
  const get = async (conn: Kysely<Database>, orgId: string, userId: string) => {
    const row = await conn.selectFrom('memberships').selectAll().where('org_id', '=', orgId).where('user_id', '=', userId).executeTakeFirst()
    return row && (compact(row) as Membership)
  }

  /** Runs `fn` serialised per org where the dialect has row locks; SQLite's single writer already is. */
  const withOrgLock = async <T>(orgId: string, fn: (conn: Kysely<Database>) => Promise<T>): Promise<T> => {
    if (!dialect.capabilities.rowLocks) return fn(db)
    const lock = async (trx: Kysely<Database>) => {
      await trx.selectFrom('orgs').select('id').where('id', '=', orgId).forUpdate().execute()
      return fn(trx)
    }
    if (db.isTransaction) return lock(db)
    return db.transaction().execute(lock)
  }

  /** SQL condition: this row is the org's only active owner. */
  const isLastActiveOwner = (orgId: string) => sql<boolean>`(role = 'owner' AND status = 'active' AND
    (SELECT count(*) FROM memberships AS m2 WHERE m2.org_id = ${orgId} AND m2.role = 'owner' AND m2.status = 'active') <= 1)`

  return {
    /** Creates a pending membership; undefined when the user already has one in this org. */
    async invite(
      orgId: string,
      input: { user_id: string; email: string; role: MembershipRole; invited_by?: string; status?: MembershipStatus },
    ): Promise<Membership | undefined> {
      const now = nowIso()
      const status = input.status ?? 'pending'
      const m: Membership = compact({
        org_id: orgId,
        user_id: input.user_id,
        email: normalizeEmail(input.email),
        role: input.role,
        status,
        invitation_id: newId('inv'),
        invited_by: input.invited_by ?? null,
        created_at: now,
        accepted_at: status === 'active' ? now : null,
      }) as Membership
      const res = await db
        .insertInto('memberships')
        .values({ invited_by: null, accepted_at: null, first_seen_at: null, ...m })
        .onConflict((oc) => oc.columns(['org_id', 'user_id']).doNothing())
        .executeTakeFirst()
      return Number(res.numInsertedOrUpdatedRows ?? 0) === 1 ? m : undefined
    },

    get(orgId: string, userId: string): Promise<Membership | undefined> {
      return get(db, orgId, userId)
    },

    async getByInvitation(invitationId: string): Promise<Membership | undefined> {
      const row = await db.selectFrom('memberships').selectAll().where('invitation_id', '=', invitationId).executeTakeFirst()
      return row && (compact(row) as Membership)
    },

    /** Memberships of one org (owners first, then by join time). */
    async list(orgId: string): Promise<Membership[]> {
      const rows = await db.selectFrom('memberships').selectAll().where('org_id', '=', orgId).orderBy('created_at').orderBy('user_id').execute()
      return rows.map((r) => compact(r) as Membership)
    },

    /** Orgs a user belongs to (for session sign-in). */
    async listForUser(userId: string): Promise<Membership[]> {
      const rows = await db.selectFrom('memberships').selectAll().where('user_id', '=', userId).orderBy('created_at').execute()
      return rows.map((r) => compact(r) as Membership)
    },

    /** Changes the role unless that would leave the org without an active owner. */
    updateRoleUnlessLastOwner(orgId: string, userId: string, role: MembershipRole): Promise<GuardedChange> {
      return withOrgLock(orgId, async (conn) => {
        const before = await get(conn, orgId, userId)
        if (!before) return { ok: false, reason: 'not_found' }
        const res = await conn
          .updateTable('memberships')
          .set({ role })
          .where('org_id', '=', orgId)
          .where('user_id', '=', userId)
          .$if(role !== 'owner', (qb) => qb.where((eb) => eb.not(isLastActiveOwner(orgId))))
          .executeTakeFirst()
        if (Number(res.numUpdatedRows) !== 1) return { ok: false, reason: (await get(conn, orgId, userId)) ? 'last_owner' : 'not_found' }
        return { ok: true, membership: { ...before, role }, from_role: before.role }
      })
    },

    /** Removes the membership unless it is the org's last active owner. */
    removeUnlessLastOwner(orgId: string, userId: string): Promise<GuardedChange> {
      return withOrgLock(orgId, async (conn) => {
        const before = await get(conn, orgId, userId)
        if (!before) return { ok: false, reason: 'not_found' }
        const res = await conn
          .deleteFrom('memberships')
          .where('org_id', '=', orgId)
          .where('user_id', '=', userId)
          .where((eb) => eb.not(isLastActiveOwner(orgId)))
          .executeTakeFirst()
        if (Number(res.numDeletedRows) !== 1) return { ok: false, reason: (await get(conn, orgId, userId)) ? 'last_owner' : 'not_found' }
        return { ok: true, membership: before, from_role: before.role }
      })
    },

    /**
     * Marks the invitation accepted. `accepted` is false when it already was (a redelivered
     * webhook), so the caller emits `membership_accepted` once. undefined: no such invitation.
     */
    async accept(invitationId: string, at: string = nowIso()): Promise<{ membership: Membership; accepted: boolean } | undefined> {
      const res = await db
        .updateTable('memberships')
        .set({ status: 'active', accepted_at: at })
        .where('invitation_id', '=', invitationId)
        .where('status', '=', 'pending')
        .executeTakeFirst()
      const membership = await this.getByInvitation(invitationId)
      return membership && { membership, accepted: Number(res.numUpdatedRows) === 1 }
    },

    /** Records the first /v1 request after acceptance; true only for the one call that set it. */
    async markFirstSeen(orgId: string, userId: string, at: string = nowIso()): Promise<boolean> {
      const res = await db
        .updateTable('memberships')
        .set({ first_seen_at: at })
        .where('org_id', '=', orgId)
        .where('user_id', '=', userId)
        .where('status', '=', 'active')
        .where('first_seen_at', 'is', null)
        .executeTakeFirst()
      return Number(res.numUpdatedRows) === 1
    },

    /** Active owners of the org. */
    async countOwners(orgId: string): Promise<number> {
      const row = await db
        .selectFrom('memberships')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('org_id', '=', orgId)
        .where('role', '=', 'owner')
        .where('status', '=', 'active')
        .executeTakeFirstOrThrow()
      return Number(row.n)
    },
  }
}
export type MembershipsRepository = ReturnType<typeof createMembershipsRepository>
