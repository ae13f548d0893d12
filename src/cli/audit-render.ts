// How audit rows look to people: a table for `audit query`, one line per event for `audit tail`,
// a table for `audit stats`. Machine output (--json) never goes through here.

import type { AuditEvent } from '../contract/index.js'
import type { StatsBucket } from '../client/index.js'
import { type Column, paint } from './output.js'

function outcome(e: AuditEvent): string {
  if (!e.decision) return ''
  return e.reason ? `${e.decision}/${e.reason}` : e.decision
}

function request(e: AuditEvent): string {
  if (!e.destination && !e.method) return ''
  return [e.method, `${e.destination ?? ''}${e.path ?? ''}`].filter(Boolean).join(' ')
}

const DETAIL_WIDTH = 60

/** `k=v k=v` of an event's detail, scalars only, cut to a width that keeps a table readable. */
export function detailSummary(detail: Record<string, unknown> | undefined, width = DETAIL_WIDTH): string {
  if (!detail) return ''
  const parts = Object.entries(detail)
    .filter(([, v]) => v !== null && v !== undefined && typeof v !== 'object')
    .map(([k, v]) => `${k}=${String(v)}`)
  const text = parts.join(' ')
  return text.length > width ? `${text.slice(0, width - 1)}…` : text
}

export const auditColumns: readonly Column<AuditEvent>[] = [
  { header: 'time', get: (e) => e.timestamp },
  { header: 'event_type', get: (e) => e.event_type },
  { header: 'actor', get: (e) => e.actor },
  { header: 'user', get: (e) => e.user_id },
  { header: 'workspace', get: (e) => e.workspace_id },
  { header: 'decision', get: outcome },
  { header: 'destination', get: request },
  { header: 'detail', get: (e) => detailSummary(e.detail) },
]

/** One readable line per event, for `audit tail`. Colour only on a TTY and never with NO_COLOR. */
export function eventLine(e: AuditEvent, stream: NodeJS.WriteStream = process.stdout): string {
  const parts = [paint('gray', e.timestamp, stream), paint('bold', e.event_type, stream), e.actor, `user=${e.user_id}`]
  if (e.workspace_id) parts.push(`ws=${e.workspace_id}`)
  if (e.task_id) parts.push(`task=${e.task_id}`)
  if (e.decision) parts.push(paint(e.decision === 'deny' ? 'red' : 'green', outcome(e), stream))
  const req = request(e)
  if (req) parts.push(req)
  if (e.capability_name) parts.push(`cap=${e.capability_name}`)
  if (e.latency_ms !== undefined) parts.push(`${e.latency_ms}ms`)
  const detail = detailSummary(e.detail, 120)
  if (detail) parts.push(paint('dim', detail, stream))
  return parts.join('  ')
}

/** Columns of a stats table: the group's dimensions (in first-seen order), the bucket, the value. */
export function statsColumns(buckets: readonly StatsBucket[]): Column<StatsBucket>[] {
  const dims: string[] = []
  for (const b of buckets) for (const k of Object.keys(b.group ?? {})) if (!dims.includes(k)) dims.push(k)
  const columns: Column<StatsBucket>[] = dims.map((d) => ({ header: d, get: (b) => b.group?.[d] }))
  if (buckets.some((b) => b.bucket !== undefined)) columns.push({ header: 'bucket', get: (b) => b.bucket })
  columns.push({ header: 'value', get: (b) => b.value })
  return columns
}
