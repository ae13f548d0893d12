import { auditEventSchema } from './wire-audit.js'

// The provable log's responses (docs/audit.md "API"): checkpoints with the keys that signed them,
// an inclusion proof of one row, a consistency proof between two checkpoints. Hashes are hex;
// `note` is the signed checkpoint exactly as published to the witness.
const hex = { type: 'string', pattern: '^[0-9a-f]{64}$' } as const

export const checkpointSchema = {
  type: 'object',
  required: ['size', 'root_hash', 'time', 'key_name', 'note'],
  additionalProperties: false,
  properties: { size: { type: 'integer' }, root_hash: hex, time: { type: 'string' }, key_name: { type: 'string' }, note: { type: 'string' } },
} as const

export const checkpointListSchema = {
  type: 'object',
  required: ['tree_size', 'checkpoints', 'keys'],
  additionalProperties: false,
  properties: {
    tree_size: { type: 'integer' },
    checkpoints: { type: 'array', items: checkpointSchema },
    keys: {
      type: 'array',
      items: { type: 'object', required: ['name', 'vkey', 'created_at'], additionalProperties: false, properties: { name: { type: 'string' }, vkey: { type: 'string' }, created_at: { type: 'string' } } },
    },
  },
} as const

export const inclusionProofSchema = {
  type: 'object',
  required: ['id', 'leaf_index', 'leaf_hash', 'tree_size', 'root_hash', 'checkpoint', 'proof'],
  additionalProperties: false,
  properties: {
    id: { type: 'string' }, leaf_index: { type: 'integer' }, leaf_hash: hex, tree_size: { type: 'integer' }, root_hash: hex,
    checkpoint: { type: 'string' }, proof: { type: 'array', items: hex },
  },
} as const

export const consistencyProofSchema = {
  type: 'object',
  required: ['from_size', 'to_size', 'from_root', 'to_root', 'proof'],
  additionalProperties: false,
  properties: { from_size: { type: 'integer' }, to_size: { type: 'integer' }, from_root: hex, to_root: hex, proof: { type: 'array', items: hex } },
} as const

/** A page of the org's tree: each leaf with its row as stored now (null when the row is gone). */
export const logPageSchema = {
  type: 'object',
  required: ['tree_size', 'leaves'],
  additionalProperties: false,
  properties: {
    tree_size: { type: 'integer' },
    leaves: {
      type: 'array',
      items: {
        type: 'object', required: ['index', 'id', 'leaf_hash', 'row'], additionalProperties: false,
        properties: { index: { type: 'integer' }, id: { type: 'string' }, leaf_hash: hex, row: { anyOf: [auditEventSchema, { type: 'null' }] } },
      },
    },
  },
} as const

/** The org's rows in no leaf (first 10,000), each with whether it waits in the queue. */
export const unloggedSchema = {
  type: 'object',
  required: ['rows'],
  additionalProperties: false,
  properties: {
    rows: { type: 'array', items: { type: 'object', required: ['row', 'pending'], additionalProperties: false, properties: { row: auditEventSchema, pending: { type: 'boolean' } } } },
  },
} as const
