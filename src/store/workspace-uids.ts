// Each workspace's own host uid (table `workspace_uids`, migration 20261129T020000-runtime-workspace-uids;
// docs/runtime.md "One uid per workspace"). A uid is handed out once, from the operator's range:
// the row's primary key refuses a second holder, so two replicas allocating at once never share
// one (the loser of the insert takes the next free uid). The lowest free uid is taken, so one
// released is reused; it is released only after the workspace's files are gone.
import { type Kysely, sql } from 'kysely'
import { nowIso } from '../contract/index.js'
import { isUniqueViolation } from './dialects/unique.js'

type Num = number | string | bigint
export interface WorkspaceUidsTable { uid: Num; workspace_id: string; allocated_at: string }
interface Db { workspace_uids: WorkspaceUidsTable }

/** A range of host uids, `first` to `first + count - 1`; each workspace's gid is its uid. */
export interface UidRange {
  first: number
  count: number
}

export class UidRangeExhaustedError extends Error {}

export interface WorkspaceUids {
  /** The workspace's uid: the one it holds, else the lowest free one of `range`, now held. */
  allocate(workspaceId: string, range: UidRange): Promise<number>
  /** The uid the workspace holds, if any. */
  of(workspaceId: string): Promise<number | undefined>
  /** Frees the workspace's uid for reuse: call only once none of its files or processes are left. */
  release(workspaceId: string): Promise<void>
}

/** Inserts lost to another allocator before giving up (each loss means another uid was taken). */
const MAX_ATTEMPTS = 50

export function workspaceUids(store: { readonly db: Kysely<any> }): WorkspaceUids {
  const db = store.db as unknown as Kysely<Db>

  async function of(workspaceId: string): Promise<number | undefined> {
    const row = await db.selectFrom('workspace_uids').select('uid').where('workspace_id', '=', workspaceId).executeTakeFirst()
    return row ? Number(row.uid) : undefined
  }

  /** The lowest uid of the range no row holds, or undefined when every one is held. */
  async function lowestFree(range: UidRange): Promise<number | undefined> {
    const last = range.first + range.count - 1
    const first = await db.selectFrom('workspace_uids').select('uid').where('uid', '=', range.first).executeTakeFirst()
    if (!first) return range.first
    // The first uid after a held one that is itself free: a gap left by a release, or the end.
    const { rows } = await sql<{ uid: Num | null }>`
      SELECT MIN(a.uid + 1) AS uid FROM workspace_uids a
      WHERE a.uid >= ${range.first} AND a.uid < ${last}
        AND NOT EXISTS (SELECT 1 FROM workspace_uids b WHERE b.uid = a.uid + 1)`.execute(db)
    const uid = rows[0]?.uid
    return uid === null || uid === undefined ? undefined : Number(uid)
  }

  return {
    of,
    async allocate(workspaceId, range) {
      for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        const held = await of(workspaceId)
        if (held !== undefined) return held
        const uid = await lowestFree(range)
        if (uid === undefined) {
          throw new UidRangeExhaustedError(`every uid of the sandbox range ${range.first}-${range.first + range.count - 1} is held by a workspace: widen it (CORRAL_SANDBOX_UID_COUNT)`)
        }
        try {
          await db.insertInto('workspace_uids').values({ uid, workspace_id: workspaceId, allocated_at: nowIso() }).execute()
          return uid
        } catch (err) {
          // Another allocator took this uid (or gave this workspace one) first: look again.
          if (!isUniqueViolation(err)) throw err
        }
      }
      throw new Error(`no uid could be allocated to workspace ${workspaceId}: ${MAX_ATTEMPTS} inserts lost to other allocators`)
    },
    async release(workspaceId) {
      await db.deleteFrom('workspace_uids').where('workspace_id', '=', workspaceId).execute()
    },
  }
}
