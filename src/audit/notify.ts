// The wire format of live-bus notifications. Postgres NOTIFY payloads are limited to 8000 bytes,
// so committed rows are announced by id, grouped per org and chunked; listeners fetch the rows.
//   payload = "<org_id> <id>,<id>,…"

import type { Store } from '../store/index.js'
import type { AuditEvent } from '../contract/index.js'

export const AUDIT_CHANNEL = 'corral_audit'
const MAX_PAYLOAD_BYTES = 7_500

/** Announces the new ids of a committed batch through `store.notify` (a Store, or a transaction's after-commit queue). */
export async function publishCommitted(store: Pick<Store, 'notify'>, batch: readonly AuditEvent[], newIds: readonly string[]): Promise<void> {
  if (newIds.length === 0) return
  const fresh = new Set(newIds)
  const byOrg = new Map<string, string[]>()
  for (const e of batch) {
    if (!fresh.has(e.id)) continue
    let ids = byOrg.get(e.org_id)
    if (!ids) byOrg.set(e.org_id, (ids = []))
    ids.push(e.id)
  }
  for (const [org, ids] of byOrg) {
    let chunk: string[] = []
    let size = org.length + 1
    for (const id of ids) {
      if (chunk.length > 0 && size + id.length + 1 > MAX_PAYLOAD_BYTES) {
        await store.notify(AUDIT_CHANNEL, `${org} ${chunk.join(',')}`)
        chunk = []
        size = org.length + 1
      }
      chunk.push(id)
      size += id.length + 1
    }
    if (chunk.length > 0) await store.notify(AUDIT_CHANNEL, `${org} ${chunk.join(',')}`)
  }
}

export function parseNotification(payload: string): { orgId: string; ids: string[] } | undefined {
  const space = payload.indexOf(' ')
  if (space <= 0) return undefined
  return { orgId: payload.slice(0, space), ids: payload.slice(space + 1).split(',').filter(Boolean) }
}
