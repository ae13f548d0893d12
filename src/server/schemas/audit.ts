// Audit query/stats parameters and the audit event response shape (spec "Audit event", "Audit").
import { ACTORS, AUDIT_ORDERS, CATEGORIES } from '../../contract/index.js'

const stringOrList = { anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }] } as const

export const auditQuerystring = {
  type: 'object',
  additionalProperties: false,
  properties: {
    filter: stringOrList,
    from: { type: 'string', format: 'date-time' },
    to: { type: 'string', format: 'date-time' },
    order: { type: 'string', enum: AUDIT_ORDERS },
    limit: { type: 'string', pattern: '^[0-9]{1,9}$' },
    cursor: { type: 'string', minLength: 1, maxLength: 4096 },
  },
} as const

export const statsQuerystring = {
  type: 'object',
  additionalProperties: false,
  properties: {
    group_by: { type: 'string' },
    time_bucket: { type: 'string' },
    bucket_by: { type: 'string' },
    metric: { type: 'string' },
    top: { type: 'string' },
    filter: stringOrList,
    from: { type: 'string', format: 'date-time' },
    to: { type: 'string', format: 'date-time' },
  },
} as const

export const streamQuerystring = {
  type: 'object',
  additionalProperties: false,
  properties: {
    api_key: { type: 'string' },
    last_event_id: { type: 'string', maxLength: 64 },
    filter: stringOrList,
  },
} as const

const obj = { type: 'object', additionalProperties: true } as const

export const auditEventSchema = {
  type: 'object',
  required: ['id', 'org_id', 'user_id', 'timestamp', 'event_type', 'category', 'actor'],
  properties: {
    id: { type: 'string' },
    org_id: { type: 'string' },
    user_id: { type: 'string' },
    timestamp: { type: 'string' },
    event_type: { type: 'string' },
    category: { type: 'string', enum: CATEGORIES },
    actor: { type: 'string', enum: ACTORS },
    workspace_id: { type: 'string' },
    task_id: { type: 'string' },
    agent_role: { type: 'string' },
    agent_provider: { type: 'string' },
    destination: { type: 'string' },
    method: { type: 'string' },
    path: { type: 'string' },
    decision: { type: 'string' },
    reason: { type: 'string' },
    latency_ms: { type: 'integer' },
    transforms_applied: { type: 'integer' },
    validations_applied: { type: 'integer' },
    policy_type: { type: 'string' },
    phase: { type: 'string' },
    capability_name: { type: 'string' },
    detail: obj,
    debits: obj,
    budget_state: obj,
    floored: obj,
    transforms_failed: obj,
    auth_used: { type: 'array', items: { type: 'string' } },
    auth_failures: obj,
  },
} as const

export const auditPageSchema = {
  type: 'object',
  required: ['events'],
  properties: { events: { type: 'array', items: auditEventSchema }, cursor: { type: 'string' } },
} as const

export const statsSchema = {
  type: 'object',
  required: ['buckets'],
  properties: {
    buckets: {
      type: 'array',
      items: {
        type: 'object',
        required: ['group', 'value'],
        properties: {
          group: { type: 'object', additionalProperties: { type: 'string' } },
          bucket: { type: 'string' },
          value: { type: 'number' },
        },
      },
    },
  },
} as const
