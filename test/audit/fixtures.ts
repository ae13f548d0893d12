// Small builders for audit tests.
import type { NewAuditEvent } from '../../src/contract/index.js'

export function decision(org: string, over: Partial<NewAuditEvent> = {}): NewAuditEvent {
  return {
    org_id: org, user_id: 'usr_1', event_type: 'policy_decision', category: 'audit', actor: 'policy-engine',
    decision: 'allow', destination: 'api.example.com', method: 'POST', path: '/v1/chat', policy_type: 'http',
    phase: 'response_body', capability_name: 'chat', latency_ms: 12, transforms_applied: 1, validations_applied: 0,
    workspace_id: 'ws_1', debits: { tokens: 10 }, budget_state: { tokens: { used: 10, max: 100 } },
    ...over,
  }
}

export function mutation(org: string, over: Partial<NewAuditEvent> = {}): NewAuditEvent {
  return {
    org_id: org, user_id: 'system', event_type: 'api_key_created', category: 'audit', actor: 'control-plane',
    detail: { resource_id: 'key_1', label: 'ci', prefix: 'ck_12', permission_set: 'read_only' },
    ...over,
  }
}

export const orgId = () => `org_${Math.random().toString(36).slice(2, 12)}`
