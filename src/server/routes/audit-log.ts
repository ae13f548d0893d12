// The provable log over HTTP (docs/audit.md "API"): the org's signed checkpoints and the keys
// that signed them, a checkpoint now, the inclusion proof of one row, and the consistency proof
// between two checkpoints. Checkpoints and consistency proofs speak of the whole org's log, so
// they need `audit:read`; an inclusion proof speaks of one row, so `audit:read:own` may ask for
// its own rows' proofs.
import type { FastifyInstance } from 'fastify'
import { consistencyFor, inclusionFor } from '../../audit/index.js'
import { apiError, checkpointListSchema, logPageSchema, unloggedSchema, checkpointSchema, consistencyProofSchema, inclusionProofSchema, notFound } from '../../contract/index.js'
import type { StoredCheckpoint } from '../../store/index.js'
import type { ServerDeps } from '../types.js'

const ORG_LOG = [['audit:read']] as const
const ROW_PROOF = [['audit:read', 'audit:read:own']] as const
// Querystrings are strings (the app coerces nothing): sizes are digit strings, read with Number.
const size = { type: 'string', pattern: '^[0-9]{1,15}$' } as const
const num = (s: string | undefined) => (s === undefined ? undefined : Number(s))

const wire = (c: StoredCheckpoint) => ({ size: c.size, root_hash: c.root, time: c.time, key_name: c.keyName, note: c.note })

export async function auditLogRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  checkpointRoutes(app, deps)
  logRoutes(app, deps)
  proofRoutes(app, deps)
}

function checkpointRoutes(app: FastifyInstance, deps: ServerDeps): void {
  app.get<{ Querystring: { after_size?: string; limit?: string } }>(
    '/audit/checkpoints',
    {
      config: { permission: ORG_LOG },
      schema: {
        querystring: { type: 'object', additionalProperties: false, properties: { after_size: size, limit: { type: 'string', pattern: '^([1-9][0-9]{0,2}|1000)$' } } },
        response: { 200: checkpointListSchema },
      },
    },
    async (request) => {
      const org = request.principal!.org.id
      const [tree, cps, keys] = await Promise.all([
        deps.store.auditLog.tree(org),
        deps.store.auditLog.checkpoints(org, { afterSize: num(request.query.after_size), limit: num(request.query.limit) ?? 100 }),
        deps.store.auditLog.keys(),
      ])
      return { tree_size: tree?.size ?? 0, checkpoints: cps.map(wire), keys: keys.map((k) => ({ name: k.name, vkey: k.vkey, created_at: k.createdAt })) }
    },
  )

  app.post(
    '/audit/checkpoints',
    { config: { permission: ORG_LOG, openapi: { noBody: true } }, schema: { response: { 200: checkpointSchema } } },
    async (request) => {
      const org = request.principal!.org.id
      if (!deps.auditLog) throw apiError('service_unavailable', 'this server does not sign audit checkpoints')
      const [cp] = await deps.auditLog.checkpoint(org)
      if (!cp) throw apiError('not_found', 'the org\'s audit log has no rows to checkpoint yet')
      return wire(cp)
    },
  )
}

function logRoutes(app: FastifyInstance, deps: ServerDeps): void {
  app.get<{ Querystring: { from?: string; limit?: string } }>(
    '/audit/log',
    {
      config: { permission: ORG_LOG },
      schema: {
        querystring: { type: 'object', additionalProperties: false, properties: { from: size, limit: { type: 'string', pattern: '^([1-9][0-9]{0,3}|10000)$' } } },
        response: { 200: logPageSchema },
      },
    },
    async (request) => {
      const org = request.principal!.org.id
      const from = num(request.query.from) ?? 0
      const [tree, leaves] = await Promise.all([deps.store.auditLog.tree(org), deps.store.auditLog.leaves(org, from, from + (num(request.query.limit) ?? 1000))])
      const rows = await deps.store.auditLog.rows(leaves.map((l) => l.eventId))
      return {
        tree_size: tree?.size ?? 0,
        leaves: leaves.map((l) => {
          const row = rows.get(l.eventId)
          return { index: l.idx, id: l.eventId, leaf_hash: l.leafHash, row: row && row.org_id === org ? row : null }
        }),
      }
    },
  )

  app.get(
    '/audit/log/unlogged',
    { config: { permission: ORG_LOG }, schema: { response: { 200: unloggedSchema } } },
    async (request) => ({ rows: (await deps.store.auditLog.unlogged(request.principal!.org.id)).slice(0, 10_000) }),
  )

}

function proofRoutes(app: FastifyInstance, deps: ServerDeps): void {
  app.get<{ Querystring: { id: string; tree_size?: string } }>(
    '/audit/proofs/inclusion',
    {
      config: { permission: ROW_PROOF },
      schema: {
        querystring: { type: 'object', required: ['id'], additionalProperties: false, properties: { id: { type: 'string', maxLength: 64 }, tree_size: size } },
        response: { 200: inclusionProofSchema },
      },
    },
    async (request) => {
      const p = request.principal!
      const { id } = request.query
      const treeSize = num(request.query.tree_size)
      if (request.grants[0].scope === 'own') {
        const row = await deps.store.audit.getById(p.org.id, id)
        if (!row || row.user_id !== p.userId) throw notFound('audit event')
      }
      const r = await inclusionFor(deps.store, p.org.id, id, treeSize)
      if (r === 'no_leaf') throw notFound('audit event in the log')
      if (r === 'no_checkpoint') throw apiError('not_found', treeSize === undefined ? 'no checkpoint covers this event yet' : `no checkpoint of size ${treeSize} covers this event`)
      return r
    },
  )

  app.get<{ Querystring: { from: string; to: string } }>(
    '/audit/proofs/consistency',
    {
      config: { permission: ORG_LOG },
      schema: {
        querystring: { type: 'object', required: ['from', 'to'], additionalProperties: false, properties: { from: size, to: size } },
        response: { 200: consistencyProofSchema },
      },
    },
    async (request) => {
      const [from, to] = [Number(request.query.from), Number(request.query.to)]
      if (from > to) throw apiError('validation_error', '`from` must not be larger than `to`', { fields: { from: 'larger than to' } })
      const r = await consistencyFor(deps.store, request.principal!.org.id, from, to)
      if (!r) throw apiError('not_found', `no checkpoints of sizes ${from} and ${to}`)
      return r
    },
  )
}
