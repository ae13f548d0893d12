// The audit row's columns in the spec's order: the CSV header and the order of its cells.
import type { AuditEvent } from '../../contract/index.js'

export type { AuditEvent }
export const AUDIT_COLUMNS_IN_ORDER = [
  'id', 'org_id', 'user_id', 'timestamp', 'event_type', 'category', 'actor', 'workspace_id', 'task_id', 'agent_role', 'agent_provider',
  'destination', 'method', 'path', 'decision', 'reason', 'latency_ms', 'transforms_applied', 'validations_applied', 'policy_type',
  'phase', 'capability_name', 'detail', 'debits', 'budget_state', 'floored', 'transforms_failed', 'auth_used', 'auth_failures',
] as const satisfies ReadonlyArray<keyof AuditEvent>
