// The audit responses' schemas (spec "Audit event", "Audit"): the page of events and the stats
// buckets. The event row's type is the contract's AuditEvent (audit-vocabulary.ts, with its closed
// lists); the schema below must list exactly its columns, which the check at the end enforces at
// compile time, so a column cannot reach the type and not the wire (or the reverse).
import type { FromSchema } from 'json-schema-to-ts'
import { ACTORS, CATEGORIES, type AuditEvent } from './audit-vocabulary.js'

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
  additionalProperties: false,
  required: ['buckets'],
  properties: {
    buckets: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
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
export type StatsJson = FromSchema<typeof statsSchema>

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false
/** Fails to compile when the schema's columns and AuditEvent's differ. */
const schemaListsEveryColumn: Same<keyof typeof auditEventSchema.properties, keyof AuditEvent> = true
void schemaListsEveryColumn
