// The provable log's tables (migrations/20261129T060000-audit-merkle.ts): the queue of rows not
// yet in a tree, the leaves, each org's tree state, the signed checkpoints and the public keys.
// Only SQL lives here; the hashing, the tree and the signatures are src/audit/merkle's. An append
// is one transaction that moves a tree from one size to the next with a conditional update, so two
// replicas appending at once cannot both extend the same size: the second one's update finds the
// size moved and its whole transaction is rolled back (AppendConflictError) to be retried.
import { sql, type Kysely } from 'kysely'
import type { AuditEvent } from '../contract/index.js'
import { fromRow } from './repositories/audit.js'
import type { StoreDialect } from './dialects/types.js'
import type { Database } from './schema.js'

type Num = number | string | bigint
interface AuditLogTables {
  audit_log_pending: { seq: Num; event_id: string; org_id: string }
  audit_log_leaves: { org_id: string; idx: Num; event_id: string; leaf_hash: string }
  audit_log_trees: { org_id: string; size: Num; edge: string; root: string; updated_at: string }
  audit_checkpoints: { org_id: string; size: Num; root: string; time: string; key_name: string; note: string }
  audit_log_keys: { name: string; vkey: string; created_at: string }
}
type Db = Database & AuditLogTables

export interface PendingRow { seq: number; eventId: string; orgId: string }
/** The columns `pendingBatch` adds to each event's row: not the event's, left out of its encoding. */
export const QUEUE_COLUMNS: ReadonlySet<string> = new Set(['p_seq', 'p_event_id', 'p_org_id', 'p_leafed'])
/** The columns `leafRows` adds to each event's row. */
export const LEAF_COLUMNS: ReadonlySet<string> = new Set(['l_idx', 'l_event_id', 'l_leaf_hash'])
/** A queue entry for the appender: the row's values as the driver returned them, in the read's column order (absent when the row is gone; QUEUE_COLUMNS beside the event's), and whether it already has a leaf. */
export interface QueuedRow extends PendingRow { leafed: boolean; values?: readonly unknown[] }
/** What `pendingBatch` hands the queue's head to: the columns' names first (again if the read starts over), then each entry, whose `values` are valid only during the call. */
export interface QueueVisitor {
  begin(columns: readonly string[]): void
  entry(row: QueuedRow): void
}
export interface LogLeaf { idx: number; eventId: string; leafHash: string }
/** A tree's state: size, right edge (hex hashes, largest subtree first) and root (hex). */
export interface LogTree { orgId: string; size: number; edge: string[]; root: string; updatedAt: string }
export interface StoredCheckpoint { orgId: string; size: number; root: string; time: string; keyName: string; note: string }

/** Another process extended the tree first; nothing of this append was stored. */
export class AppendConflictError extends Error {
  override readonly name = 'AppendConflictError'
}

/**
 * How the log's statements reach rows on SQLite: through the index each join is by, named. SQLite
 * plans from sqlite_stat1, and statistics taken while a table was nearly empty (a new store's open
 * analyzes every table; they are refreshed hourly) make a scan of the whole table look cheaper
 * than a lookup: a scan of audit_events once per queued row made an append round, and a
 * verification's read, quadratic in the log's size. A join by key has one right plan, so it is
 * not left to the statistics (docs/audit.md "Catch-up at the cost of a lookup").
 */
export const SQLITE_LOG_JOINS = {
  /** audit_events by id (its primary key). */
  events: 'audit_events AS e INDEXED BY sqlite_autoindex_audit_events_1',
  /** audit_log_leaves by event id. */
  leavesByEvent: 'audit_log_leaves AS l INDEXED BY audit_log_leaves_event_idx',
  /** audit_log_leaves by (org, index) (its primary key). */
  leavesByIndex: 'audit_log_leaves AS l INDEXED BY sqlite_autoindex_audit_log_leaves_1',
} as const

const CHUNK = 500
/** Single-column lists: well under both dialects' bind limits. */
const BIG_CHUNK = 10_000
/** Four columns a leaf. */
const LEAF_CHUNK = 5_000
/** Entries per JSON parameter of an append round. */
const ROUND_CHUNK = 20_000

// long-function: one object literal of short methods over the log's tables, sharing `db`
export function auditLog(handle: Kysely<Database>, dialect: StoreDialect) {
  const db = handle as unknown as Kysely<Db>
  const pg = dialect.name === 'postgres'
  return {
    async pending(limit: number, orgId?: string): Promise<PendingRow[]> {
      let q = db.selectFrom('audit_log_pending').select(['seq', 'event_id', 'org_id']).orderBy('seq').limit(limit)
      if (orgId) q = q.where('org_id', '=', orgId)
      return (await q.execute()).map((r) => ({ seq: Number(r.seq), eventId: String(r.event_id), orgId: r.org_id }))
    },

    /**
     * The queue's first and last seq (absent when empty): two index reads, so the appender can
     * measure its lag in rows without counting the queue.
     */
    async queueExtent(): Promise<{ head: number; tail: number } | undefined> {
      const r = await sql<{ head: Num | null; tail: Num | null }>`SELECT (SELECT min(seq) FROM audit_log_pending) AS head, (SELECT max(seq) FROM audit_log_pending) AS tail`.execute(db)
      const row = r.rows[0]
      return row?.head === null || row?.head === undefined ? undefined : { head: Number(row.head), tail: Number(row.tail) }
    },

    /**
     * The queue's head for the appender, in one read, into `visit`: each entry with its row's values
     * as the driver returns them (absent when the row is gone) and whether the row already has a
     * leaf. Rows come as arrays, handed on as they are read (an object of some 38 keys per row, and
     * a batch of them kept, cost more than the rest of the read); inside a transaction, through it,
     * as objects turned into arrays.
     */
    async pendingBatch(limit: number, visit: QueueVisitor): Promise<void> {
      const query = pg
        ? sql`SELECT e.*, p.seq AS p_seq, p.event_id AS p_event_id, p.org_id AS p_org_id, l.idx AS p_leafed
            FROM audit_log_pending p LEFT JOIN audit_events e ON e.id = p.event_id LEFT JOIN audit_log_leaves l ON l.event_id = p.event_id::text
            ORDER BY p.seq LIMIT ${limit}`
        : sql`SELECT e.*, p.seq AS p_seq, p.event_id AS p_event_id, p.org_id AS p_org_id, l.idx AS p_leafed
            FROM audit_log_pending p LEFT JOIN ${sql.raw(SQLITE_LOG_JOINS.events)} ON e.id = p.event_id LEFT JOIN ${sql.raw(SQLITE_LOG_JOINS.leavesByEvent)} ON l.event_id = p.event_id
            ORDER BY p.seq LIMIT ${limit}`
      let id = -1, seq = -1, eventId = -1, orgId = -1, leafed = -1
      const arrays = {
        begin(columns: readonly string[]) {
          const at = (name: string) => columns.indexOf(name)
          ;[id, seq, eventId, orgId, leafed] = [at('id'), at('p_seq'), at('p_event_id'), at('p_org_id'), at('p_leafed')]
          visit.begin(columns)
        },
        row(v: readonly unknown[]) {
          const base = { seq: Number(v[seq]), eventId: String(v[eventId]), orgId: v[orgId] as string, leafed: v[leafed] !== null && v[leafed] !== undefined }
          visit.entry(v[id] === null || v[id] === undefined ? base : { ...base, values: v })
        },
      }
      if (!db.isTransaction) {
        const compiled = query.compile(db)
        return dialect.selectArrays(compiled.sql, compiled.parameters, arrays)
      }
      const objects = (await query.execute(db)).rows as Array<Record<string, unknown>>
      arrays.begin(objects.length > 0 ? Object.keys(objects[0]) : [])
      for (const o of objects) arrays.row(Object.values(o))
    },

    /**
     * One append round in the caller's transaction: every tree moved from its old size to the
     * next (AppendConflictError when one moved meanwhile), all leaves in one statement, the queue
     * entries taken dropped. Leaves and seqs travel as one JSON parameter each, so a round of
     * thousands of leaves is three statements whatever its size.
     */
    async appendRound(trees: ReadonlyArray<{ from: LogTree | undefined; next: LogTree }>, leaves: ReadonlyArray<LogLeaf & { orgId: string }>, seqs: readonly number[]): Promise<void> {
      for (let i = 0; i < leaves.length; i += ROUND_CHUNK) {
        const json = JSON.stringify(leaves.slice(i, i + ROUND_CHUNK).map((l) => [l.orgId, l.idx, l.eventId, l.leafHash]))
        await (pg
          ? sql`INSERT INTO audit_log_leaves (org_id, idx, event_id, leaf_hash)
              SELECT e->>0, (e->>1)::bigint, e->>2, e->>3 FROM json_array_elements(${json}::json) AS e`
          : sql`INSERT INTO audit_log_leaves (org_id, idx, event_id, leaf_hash)
              SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each(${json})`).execute(db)
      }
      for (const { from, next } of trees) {
        const values = { size: next.size, edge: JSON.stringify(next.edge), root: next.root, updated_at: next.updatedAt }
        if (!from) {
          await db.insertInto('audit_log_trees').values({ org_id: next.orgId, ...values }).execute()
          continue
        }
        const res = await db.updateTable('audit_log_trees').set(values).where('org_id', '=', next.orgId).where('size', '=', from.size).executeTakeFirst()
        if (Number(res.numUpdatedRows) !== 1) throw new AppendConflictError(`the tree of ${next.orgId} moved past ${from.size}`)
      }
      for (let i = 0; i < seqs.length; i += ROUND_CHUNK) {
        const json = JSON.stringify(seqs.slice(i, i + ROUND_CHUNK))
        await (pg
          ? sql`DELETE FROM audit_log_pending WHERE seq IN (SELECT json_array_elements_text(${json}::json)::bigint)`
          : sql`DELETE FROM audit_log_pending WHERE seq IN (SELECT value FROM json_each(${json}))`).execute(db)
      }
    },

    async dropPending(seqs: readonly number[]): Promise<void> {
      for (let i = 0; i < seqs.length; i += BIG_CHUNK) {
        await db.deleteFrom('audit_log_pending').where('seq', 'in', seqs.slice(i, i + BIG_CHUNK)).execute()
      }
    },

    /** Rows by id (any org), as the API reads them. */
    async rows(ids: readonly string[]): Promise<Map<string, AuditEvent>> {
      const out = new Map<string, AuditEvent>()
      for (let i = 0; i < ids.length; i += CHUNK) {
        const rows = await db.selectFrom('audit_events').selectAll().where('id', 'in', ids.slice(i, i + CHUNK)).execute()
        for (const r of rows) out.set(String(r.id), fromRow(r))
      }
      return out
    },

    /** One page of an org's rows in id order (verification reads the whole log with it). */
    async rowPage(orgId: string, afterId: string | undefined, limit: number): Promise<AuditEvent[]> {
      let q = db.selectFrom('audit_events').selectAll().where('org_id', '=', orgId)
      if (afterId) q = q.where('id', '>', afterId)
      return (await q.orderBy('id').limit(limit).execute()).map(fromRow)
    },

    /** An org's rows that are in no leaf, each with whether it waits in the queue (not yet appended). */
    async unlogged(orgId: string): Promise<Array<{ row: AuditEvent; pending: boolean }>> {
      const rows = await db.selectFrom('audit_events as e').selectAll('e').where('e.org_id', '=', orgId)
        .where(({ not, exists, selectFrom }) => not(exists(selectFrom('audit_log_leaves as l').select('l.idx')
          .where('l.event_id', '=', pg ? sql<string>`e.id::text` : sql<string>`e.id`))))
        .orderBy('e.ts').orderBy('e.id').execute()
      const queued = new Set((await db.selectFrom('audit_log_pending').select('event_id').where('org_id', '=', orgId).execute()).map((r) => String(r.event_id)))
      return rows.map((r) => ({ row: fromRow(r), pending: queued.has(String(r.id)) }))
    },

    async tree(orgId: string): Promise<LogTree | undefined> {
      const r = await db.selectFrom('audit_log_trees').selectAll().where('org_id', '=', orgId).executeTakeFirst()
      return r && treeOf(r)
    },

    async treesOf(orgIds: readonly string[]): Promise<LogTree[]> {
      const out: LogTree[] = []
      for (let i = 0; i < orgIds.length; i += CHUNK) {
        out.push(...(await db.selectFrom('audit_log_trees').selectAll().where('org_id', 'in', orgIds.slice(i, i + CHUNK)).execute()).map(treeOf))
      }
      return out
    },

    async trees(): Promise<LogTree[]> {
      return (await db.selectFrom('audit_log_trees').selectAll().orderBy('org_id').execute()).map(treeOf)
    },

    /** Stores `leaves` after `from` and moves the tree from `from.size` to `next` (AppendConflictError when it moved). */
    async append(from: LogTree | undefined, next: LogTree, leaves: readonly LogLeaf[]): Promise<void> {
      const base = from?.size ?? 0
      for (let i = 0; i < leaves.length; i += LEAF_CHUNK) {
        await db.insertInto('audit_log_leaves').values(leaves.slice(i, i + LEAF_CHUNK).map((l) => ({
          org_id: next.orgId, idx: l.idx, event_id: l.eventId, leaf_hash: l.leafHash,
        }))).execute()
      }
      const values = { size: next.size, edge: JSON.stringify(next.edge), root: next.root, updated_at: next.updatedAt }
      if (base === 0 && !from) {
        await db.insertInto('audit_log_trees').values({ org_id: next.orgId, ...values }).execute()
        return
      }
      const res = await db.updateTable('audit_log_trees').set(values).where('org_id', '=', next.orgId).where('size', '=', base).executeTakeFirst()
      if (Number(res.numUpdatedRows) !== 1) throw new AppendConflictError(`the tree of ${next.orgId} moved past ${base}`)
    },

    async leaves(orgId: string, from: number, to: number): Promise<LogLeaf[]> {
      const rows = await db.selectFrom('audit_log_leaves').select(['idx', 'event_id', 'leaf_hash'])
        .where('org_id', '=', orgId).where('idx', '>=', from).where('idx', '<', to).orderBy('idx').execute()
      return rows.map((r) => ({ idx: Number(r.idx), eventId: String(r.event_id), leafHash: r.leaf_hash }))
    },

    /**
     * Up to `limit` leaves of an org from index `from`, each with its row as the driver returns it
     * (the leaf's columns beside the event's, LEAF_COLUMNS; the event's are null when no row has the
     * leaf's id), in one read: verification walks the whole log with it.
     */
    async leafRows(orgId: string, from: number, limit: number): Promise<Array<Record<string, unknown>>> {
      // The leaf's id is text on both dialects, the row's a uuid on PostgreSQL: a leaf id edited into
      // something that is not a uuid finds no row (it is reported removed) instead of failing the read.
      const key = pg ? sql`(CASE WHEN l.event_id ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$' THEN l.event_id::uuid END)` : sql`l.event_id`
      const r = await sql<Record<string, unknown>>`SELECT l.idx AS l_idx, l.event_id AS l_event_id, l.leaf_hash AS l_leaf_hash, e.*
        FROM ${sql.raw(pg ? 'audit_log_leaves l LEFT JOIN audit_events e' : `${SQLITE_LOG_JOINS.leavesByIndex} LEFT JOIN ${SQLITE_LOG_JOINS.events}`)} ON e.id = ${key}
        WHERE l.org_id = ${orgId} AND l.idx >= ${from} ORDER BY l.idx LIMIT ${limit}`.execute(db)
      return r.rows
    },

    /** How many rows an org has. */
    async countRows(orgId: string): Promise<number> {
      const r = await db.selectFrom('audit_events').select((eb) => eb.fn.countAll().as('n')).where('org_id', '=', orgId).executeTakeFirstOrThrow()
      return Number(r.n)
    },

    /** Which of `ids` already have a leaf (a row queued twice is appended once). */
    async leafed(ids: readonly string[]): Promise<Set<string>> {
      const out = new Set<string>()
      for (let i = 0; i < ids.length; i += BIG_CHUNK) {
        for (const r of await db.selectFrom('audit_log_leaves').select('event_id').where('event_id', 'in', ids.slice(i, i + BIG_CHUNK)).execute()) out.add(r.event_id)
      }
      return out
    },

    async leafOf(orgId: string, eventId: string): Promise<LogLeaf | undefined> {
      const r = await db.selectFrom('audit_log_leaves').select(['idx', 'event_id', 'leaf_hash'])
        .where('org_id', '=', orgId).where('event_id', '=', eventId).executeTakeFirst()
      return r && { idx: Number(r.idx), eventId: String(r.event_id), leafHash: r.leaf_hash }
    },

    /** Stores a checkpoint unless one of that size is stored; returns the stored one either way. */
    async putCheckpoint(c: StoredCheckpoint): Promise<StoredCheckpoint> {
      await db.insertInto('audit_checkpoints').values({
        org_id: c.orgId, size: c.size, root: c.root, time: c.time, key_name: c.keyName, note: c.note,
      }).onConflict((oc) => oc.columns(['org_id', 'size']).doNothing()).execute()
      const r = await db.selectFrom('audit_checkpoints').selectAll().where('org_id', '=', c.orgId).where('size', '=', c.size).executeTakeFirstOrThrow()
      return checkpointOf(r)
    },

    async checkpoints(orgId: string, opts: { afterSize?: number; limit?: number } = {}): Promise<StoredCheckpoint[]> {
      let q = db.selectFrom('audit_checkpoints').selectAll().where('org_id', '=', orgId).orderBy('size')
      if (opts.afterSize !== undefined) q = q.where('size', '>', opts.afterSize)
      if (opts.limit !== undefined) q = q.limit(opts.limit)
      return (await q.execute()).map(checkpointOf)
    },

    async checkpoint(orgId: string, size: number): Promise<StoredCheckpoint | undefined> {
      const r = await db.selectFrom('audit_checkpoints').selectAll().where('org_id', '=', orgId).where('size', '=', size).executeTakeFirst()
      return r && checkpointOf(r)
    },

    async latestCheckpoint(orgId: string): Promise<StoredCheckpoint | undefined> {
      const r = await db.selectFrom('audit_checkpoints').selectAll().where('org_id', '=', orgId).orderBy('size', 'desc').limit(1).executeTakeFirst()
      return r && checkpointOf(r)
    },

    async putKey(name: string, vkey: string, createdAt: string): Promise<void> {
      await db.insertInto('audit_log_keys').values({ name, vkey, created_at: createdAt }).onConflict((oc) => oc.column('name').doNothing()).execute()
    },

    async keys(): Promise<Array<{ name: string; vkey: string; createdAt: string }>> {
      return (await db.selectFrom('audit_log_keys').selectAll().orderBy('created_at').execute()).map((r) => ({ name: r.name, vkey: r.vkey, createdAt: r.created_at }))
    },
  }
}
export type AuditLogRepository = ReturnType<typeof auditLog>

function treeOf(r: AuditLogTables['audit_log_trees']): LogTree {
  return { orgId: r.org_id, size: Number(r.size), edge: JSON.parse(r.edge) as string[], root: r.root, updatedAt: r.updated_at }
}

function checkpointOf(r: AuditLogTables['audit_checkpoints']): StoredCheckpoint {
  return { orgId: r.org_id, size: Number(r.size), root: r.root, time: r.time, keyName: r.key_name, note: r.note }
}
