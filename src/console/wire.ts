// The /v1 wire shapes the console reads: the subset of fields it shows (the API may send more).
// Spelled here rather than imported from src/client/, whose face also loads node:fs; the audit
// event is the contract's own type.
export type { AuditEvent } from '../contract/index.js'

export interface ErrorEnvelope {
  code: string
  message: string
  request_id?: string
  details?: Record<string, unknown>
}

export interface Me {
  org: { id: string; name: string; posture?: string }
  kind: 'api_key' | 'session'
  user_id: string
  permissions: string[]
  email?: string
  role?: string
  key_id?: string
  permission_set?: string
}

export interface WorkspaceRecord {
  id: string
  role_id: string
  role_name: string
  provider_name: string
  state: string
  created_by: string
  task_count: number
  parent_workspace_id?: string
  fork_point_task_count?: number
  has_snapshot?: boolean
  failure?: string
  created_at: string
  last_activity_at?: string
  archived_at?: string
}

export interface TaskRecord {
  id: string
  workspace_id: string
  status: 'submitted' | 'running' | 'completed' | 'failed' | 'cancelled'
  reason?: string
  description: string
  summary?: string
  created_by: string
  created_at: string
  started_at?: string
  finished_at?: string
}

export interface AgentRoleRecord {
  id: string
  name: string
  display_name?: string
  description?: string
  provider_id: string
  model?: string
  capabilities?: string
  environment: string
  pack_ids: string[]
  created_at: string
  archived_at?: string
}
