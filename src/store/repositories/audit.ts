// The audit_events table: idempotent batch inserts, and the executors for the page and stats
// queries that src/audit parses and validates. Only SQL lives here; the query grammar, cursor
// encoding and permissions narrowing are src/audit's.

import type { AuditEvent, AuditOrder, FilterColumn } from '../../contract/index.js'
import type { BulkColumn } from '../dialects/types.js'
import type { AuditEventsTable } from '../schema.js'
import type { RepoContext } from './context.js'

import { AUDIT_INT_COLUMNS, AUDIT_JSON_COLUMNS, AUDIT_TEXT_COLUMNS, epochMs, isUuid } from './audit-columns.js'
import { createAuditQuarantineMethods } from './audit-quarantine.js'
import { statsRows, topValues, type AuditStatsQuery, type AuditStatsRow, type StatsDimension } from './audit-stats.js'
import { whereAudit, type AuditQB, type AuditWhere } from './audit-where.js'

export { AUDIT_INT_COLUMNS, AUDIT_JSON_COLUMNS, AUDIT_ROW_COLUMNS, AUDIT_TEXT_COLUMNS, isUuid } from './audit-columns.js'
export type { QuarantinedEvent, QuarantineInsert } from './audit-quarantine.js'
export type { AuditStatsQuery, AuditStatsRow, NumericPath, StatsDimension } from './audit-stats.js'
export type { AuditWhere } from './audit-where.js'
const COLUMN_COUNT = 8 + AUDIT_TEXT_COLUMNS.length + AUDIT_INT_COLUMNS.length + AUDIT_JSON_COLUMNS.length

/** Every column with its Postgres type, for the bulk insert path. */
const BULK_COLUMNS: readonly BulkColumn[] = [
  { name: 'id', pgType: 'uuid' },
  ...['org_id', 'user_id', 'timestamp'].map((name) => ({ name, pgType: 'text' as const })),
  { name: 'ts', pgType: 'bigint' },
  ...['event_type', 'category', 'actor', ...AUDIT_TEXT_COLUMNS].map((name) => ({ name, pgType: 'text' as const })),
  ...AUDIT_INT_COLUMNS.map((name) => ({ name, pgType: 'integer' as const })),
  ...AUDIT_JSON_COLUMNS.map((name) => ({ name, pgType: 'jsonb' as const })),
]

export interface AuditPageQuery extends AuditWhere {
  order: AuditOrder
  limit: number
  /** Keyset position: rows strictly after this (ts, id) in `order`. */
  after?: { ts: number; id: string }
}

// long-function: a repository: one closure over the database handle; each method is a short query and reads alone.
export function createAuditRepository({ db, dialect }: RepoContext) {
  const chunkRows = Math.max(1, Math.floor(dialect.capabilities.maxBindParameters / COLUMN_COUNT))

  const applyWhere = (qb: AuditQB, orgId: string, w: AuditWhere): AuditQB => whereAudit(dialect, qb, orgId, w)

  return {
    ...createAuditQuarantineMethods({ db, dialect }),
    /** Inserts rows, ignoring ids already stored (idempotent retries). Returns how many were new. */
    async insertBatch(events: readonly AuditEvent[]): Promise<number> {
      return (await this.insertBatchReturningIds(events)).length
    },

    /**
     * Like insertBatch, returning the ids that were new: a retried batch whose first attempt did
     * commit announces nothing twice on the live bus.
     */
    async insertBatchReturningIds(events: readonly AuditEvent[]): Promise<string[]> {
      if (events.length === 0) return []
      if (!db.isTransaction) {
        return dialect.insertIgnoreMany('audit_events', BULK_COLUMNS, events.map(toBulkRow), 'id')
      }
      const rows = events.map(toRow)
      const ids: string[] = []
      const insertAll = async (trx: typeof db) => {
        for (let i = 0; i < rows.length; i += chunkRows) {
          const res = await trx
            .insertInto('audit_events')
            .values(rows.slice(i, i + chunkRows) as never)
            .onConflict((oc) => oc.column('id').doNothing())
            .returning('id')
            .execute()
          for (const r of res) ids.push(String(r.id))
        }
      }
      // One transaction per batch: a batch commits whole (inside a Store transaction, as part of it).
      if (db.isTransaction) await insertAll(db)
      else await db.transaction().execute(insertAll)
      return ids
    },

    /**
     * Events already encoded by the audit writer, each line a JSON object of its columns (`ts`
     * included): inserted in one transaction, ids already stored skipped; returns the ids that were
     * new. The lines travel as they are, parsed by the database (dialects/types.ts insertJsonRecords).
     */
    async insertEncodedReturningIds(lines: readonly string[]): Promise<string[]> {
      if (lines.length === 0) return []
      return dialect.insertJsonRecords('audit_events', BULK_COLUMNS, lines, 'id')
    },

    async getById(orgId: string, id: string): Promise<AuditEvent | undefined> {
      if (!isUuid(id)) return undefined
      const row = await db.selectFrom('audit_events').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst()
      return row && fromRow(row)
    },

    /** Rows by id across orgs, in (ts, id) order: the live bus resolves notifications with it. */
    async listByIds(ids: readonly string[]): Promise<AuditEvent[]> {
      const valid = ids.filter(isUuid)
      if (valid.length === 0) return []
      const rows = await db.selectFrom('audit_events').selectAll().where('id', 'in', valid).orderBy('ts').orderBy('id').execute()
      return rows.map(fromRow)
    },

    /** The (ts, id) position of one event of the org, for keyset resumption (Last-Event-ID). */
    async positionOf(orgId: string, id: string): Promise<{ ts: number; id: string } | undefined> {
      if (!isUuid(id)) return undefined
      const row = await db.selectFrom('audit_events').select(['ts', 'id']).where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst()
      return row && { ts: Number(row.ts), id: String(row.id) }
    },

    /** One keyset page in (ts, id) order. */
    async page(orgId: string, q: AuditPageQuery): Promise<AuditEvent[]> {
      let qb = applyWhere(db.selectFrom('audit_events'), orgId, q)
      if (q.after) {
        const { ts, id } = q.after
        qb = qb.where((eb) => eb(eb.refTuple('ts', 'id'), q.order === 'asc' ? '>' : '<', eb.tuple(ts, id)))
      }
      const rows = await qb.selectAll().orderBy('ts', q.order).orderBy('id', q.order).limit(q.limit).execute()
      return rows.map(fromRow)
    },

    /** Earliest matching timestamp (epoch ms): `time_bucket=auto` without `from` sizes buckets from it. */
    async minTs(orgId: string, w: AuditWhere): Promise<number | undefined> {
      const row = await applyWhere(db.selectFrom('audit_events'), orgId, w)
        .select((eb) => eb.fn.min('ts').as('m'))
        .executeTakeFirst()
      return row?.m === null || row?.m === undefined ? undefined : Number(row.m)
    },

    /** Grouped aggregate rows. */
    stats: (orgId: string, q: AuditStatsQuery): Promise<AuditStatsRow[]> => statsRows(db, dialect, orgId, q),

    /** The `n` values of `dimension` with the largest metric, for `top=N:dimension`. */
    topValues: (orgId: string, q: AuditStatsQuery, dimension: StatsDimension, n: number): Promise<string[]> =>
      topValues(db, dialect, orgId, q, dimension, n),
  }
}
export type AuditRepository = ReturnType<typeof createAuditRepository>

type InsertRow = { [K in keyof AuditEventsTable]?: unknown }

function toRow(e: AuditEvent): InsertRow {
  const row: InsertRow = {
    id: e.id,
    org_id: e.org_id,
    user_id: e.user_id,
    timestamp: e.timestamp,
    ts: Date.parse(e.timestamp),
    event_type: e.event_type,
    category: e.category,
    actor: e.actor,
  }
  for (const c of AUDIT_TEXT_COLUMNS) row[c] = e[c] ?? null
  for (const c of AUDIT_INT_COLUMNS) row[c] = e[c] ?? null
  for (const c of AUDIT_JSON_COLUMNS) row[c] = e[c] === undefined || e[c] === null ? null : JSON.stringify(e[c])
  return row
}

const BULK_TEXT = ['org_id', 'user_id', 'timestamp'] as const
const BULK_TEXT2 = ['event_type', 'category', 'actor', ...AUDIT_TEXT_COLUMNS] as const


/** One event as values in BULK_COLUMNS order (the ingest hot path: no intermediate object). */
function toBulkRow(e: AuditEvent): unknown[] {
  const r: unknown[] = [e.id]
  for (const c of BULK_TEXT) r.push(e[c])
  r.push(epochMs(e.timestamp))
  for (const c of BULK_TEXT2) r.push(e[c] ?? null)
  for (const c of AUDIT_INT_COLUMNS) r.push(e[c] ?? null)
  for (const c of AUDIT_JSON_COLUMNS) {
    const v = e[c]
    r.push(v === undefined || v === null ? null : JSON.stringify(v))
  }
  return r
}

export function fromRow(row: Record<string, unknown>): AuditEvent {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(row)) {
    if (v === null || v === undefined || k === 'ts') continue
    if ((AUDIT_JSON_COLUMNS as readonly string[]).includes(k)) out[k] = typeof v === 'string' ? JSON.parse(v) : v
    else if ((AUDIT_INT_COLUMNS as readonly string[]).includes(k)) out[k] = Number(v)
    else out[k] = typeof v === 'string' ? v : String(v)
  }
  return out as unknown as AuditEvent
}
