// Audit query/stats parameters (spec "Audit"); the responses' schemas are the contract's (src/contract/wire-audit.ts).
import { AUDIT_ORDERS } from '../../contract/index.js'

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
