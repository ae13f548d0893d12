// The audit_events columns as lists, shared by the repository (SQL) and the audit writer's
// encoder (src/audit/encode.ts), which builds insert rows in AUDIT_ROW_COLUMNS order.

export const AUDIT_TEXT_COLUMNS = [
  'workspace_id', 'task_id', 'agent_role', 'agent_provider', 'destination', 'method', 'path', 'decision', 'reason',
  'policy_type', 'phase', 'capability_name',
] as const
export const AUDIT_INT_COLUMNS = ['latency_ms', 'transforms_applied', 'validations_applied'] as const
export const AUDIT_JSON_COLUMNS = ['detail', 'debits', 'budget_state', 'floored', 'transforms_failed', 'auth_used', 'auth_failures'] as const

/** Every column of an encoded insert row, in order (`ts` is the timestamp in epoch ms). */
export const AUDIT_ROW_COLUMNS = [
  'id', 'org_id', 'user_id', 'timestamp', 'ts', 'event_type', 'category', 'actor',
  ...AUDIT_TEXT_COLUMNS, ...AUDIT_INT_COLUMNS, ...AUDIT_JSON_COLUMNS,
] as const

/** The `ts` column of an RFC 3339 timestamp. Consecutive events mostly share one (one per millisecond): parse each once. */
let lastTsText = ''
let lastTsMs = 0
export function epochMs(timestamp: string): number {
  if (timestamp !== lastTsText) {
    lastTsMs = Date.parse(timestamp)
    lastTsText = timestamp
  }
  return lastTsMs
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
export function isUuid(s: string): boolean {
  return UUID_RE.test(s)
}
