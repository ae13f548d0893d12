// audit_quarantine: events the audit writer could not store as rows (src/audit/encode.ts), kept
// as text with the reason; append-only like the log (migration 20261126T010000-audit-hardening).
// Spread into the audit repository, so callers use store.audit.quarantine / listQuarantine.
import type { BulkColumn } from '../dialects/types.js'
import type { RepoContext } from './context.js'

const QUARANTINE_COLUMNS: readonly BulkColumn[] = [
  { name: 'id', pgType: 'text' },
  { name: 'org_id', pgType: 'text' },
  { name: 'reason', pgType: 'text' },
  { name: 'event', pgType: 'text' },
  { name: 'quarantined_at', pgType: 'text' },
  { name: 'ts', pgType: 'bigint' },
]

export interface QuarantineInsert {
  id: string
  org_id: string | null
  reason: string
  /** The event as well-formed JSON text. */
  text: string
}

export interface QuarantinedEvent {
  id: string
  org_id?: string
  reason: string
  /** The event as it was handed to the writer, as JSON text (cut when very large). */
  event: string
  quarantined_at: string
  ts: number
}

export function createAuditQuarantineMethods({ db, dialect }: RepoContext) {
  return {
    /** Keeps events that cannot be rows (insert-or-ignore on id, so a replay adds nothing twice). */
    async quarantine(records: readonly QuarantineInsert[]): Promise<number> {
      if (records.length === 0) return 0
      const now = Date.now()
      const at = new Date(now).toISOString()
      const rows = records.map((r) => [r.id, r.org_id, r.reason, r.text, at, now])
      return (await dialect.insertIgnoreMany('audit_quarantine', QUARANTINE_COLUMNS, rows, 'id')).length
    },

    /** Quarantined events, newest first, in keyset pages on (ts, id). */
    async listQuarantine(q: { limit: number; before?: { ts: number; id: string }; fromMs?: number; toMs?: number }): Promise<QuarantinedEvent[]> {
      let qb = db.selectFrom('audit_quarantine').selectAll()
      if (q.fromMs !== undefined) qb = qb.where('ts', '>=', q.fromMs as never)
      if (q.toMs !== undefined) qb = qb.where('ts', '<', q.toMs as never)
      if (q.before) {
        const { ts, id } = q.before
        qb = qb.where((eb) => eb(eb.refTuple('ts', 'id'), '<', eb.tuple(ts as never, id)))
      }
      const rows = await qb.orderBy('ts', 'desc').orderBy('id', 'desc').limit(q.limit).execute()
      return rows.map((r) => ({
        id: String(r.id),
        ...(r.org_id === null ? {} : { org_id: String(r.org_id) }),
        reason: r.reason,
        event: r.event,
        quarantined_at: r.quarantined_at,
        ts: Number(r.ts),
      }))
    },
  }
}
