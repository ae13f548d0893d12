// A mutation and its audit events commit together: the rows are inserted in the mutation's own
// database transaction (insert-or-ignore on id, the append-only table as for every row), so a
// crash leaves either both or neither (docs/reliability.md "A mutation and its audit row").
// After the commit the live bus is told (post-commit notifications of the transaction), and the
// same events, with the same ids, go to the sink like any other: the writer's insert then finds
// them stored (nothing new, nothing announced twice), and the request waits for them exactly as
// it waits for every event it emitted.

import type { AuditEvent, AuditSink, NewAuditEvent } from '../contract/index.js'
import type { Store, StoreTransaction } from '../store/index.js'
import { encodeEvent } from './encode.js'
import { publishCommitted } from './notify.js'

/** Records an event of the mutation; it is inserted in the mutation's transaction before it commits. */
export type RecordAudit = (event: NewAuditEvent) => void

/**
 * Runs `fn` in one store transaction whose audit events (`record`) are inserted in it. Refuses
 * before anything changes when the sink would refuse an event now (AuditUnavailableError).
 */
export async function auditedMutation<T>(store: Pick<Store, 'transaction'>, audit: AuditSink, fn: (tx: StoreTransaction, record: RecordAudit) => Promise<T>): Promise<T> {
  audit.admit?.()
  let recorded: NewAuditEvent[] = []
  const result = await store.transaction(async (tx) => {
    recorded = []
    const out = await fn(tx, (event) => void recorded.push(event))
    await insertInTransaction(tx, recorded)
    return out
  })
  // The rows are committed: the sink stores nothing new, and the answer waits for it as for any event.
  await Promise.all(recorded.map((e) => audit.emit(e)))
  return result
}

/**
 * Stamps the events (ids fixed here, so the sink later stores the same rows) and inserts those that
 * can be rows; an event that breaks the contract stays for the sink, which quarantines it.
 */
async function insertInTransaction(tx: StoreTransaction, recorded: NewAuditEvent[]): Promise<void> {
  const rows: AuditEvent[] = []
  for (let i = 0; i < recorded.length; i++) {
    const r = encodeEvent(recorded[i])
    if (!r.ok) continue
    const row = JSON.parse(r.value.line) as AuditEvent & { ts?: number }
    delete row.ts
    rows.push(row)
    recorded[i] = r.value.event
  }
  if (rows.length === 0) return
  const ids = await tx.audit.insertBatchReturningIds(rows)
  await publishCommitted({ notify: async (channel, payload) => tx.notify(channel, payload) }, rows, ids)
}
