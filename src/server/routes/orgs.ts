// Org memberships (spec "Memberships" operations and membership_* events) and GET /v1/me.
// Cross-org ids are "not found". Only owners grant, change or remove the owner role; the store
// refuses atomically to remove or demote the last active owner (409 last_owner). Removing a member
// reaps their personal credentials in the same transaction (credentials_reaped).
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { GuardedChange, Membership } from '../../store/index.js'
import { apiError, meSchema, membershipSchema, notFound } from '../../contract/index.js'
import { auditedMutation } from '../../audit/index.js'
import { reapPersonalCredentials } from '../../secrets/index.js'
import { ROLES, type Role } from '../permissions.js'
import { statusOnly } from '../schemas/common.js'
import type { Principal, ServerDeps } from '../types.js'

const AUTH_WRITE = [['auth:write']] as const
const AUTH_ANY = [['auth:write', 'auth:write:own']] as const

const orgParams = { type: 'object', required: ['id'], properties: { id: { type: 'string', minLength: 1, maxLength: 200 } } } as const
const memberParams = {
  type: 'object',
  required: ['id', 'user_id'],
  properties: { id: { type: 'string', minLength: 1, maxLength: 200 }, user_id: { type: 'string', minLength: 1, maxLength: 200 } },
} as const

const inviteBody = {
  type: 'object',
  required: ['email', 'role'],
  additionalProperties: false,
  properties: { email: { type: 'string', format: 'email', maxLength: 320 }, role: { type: 'string', enum: ROLES } },
} as const
const updateBody = { type: 'object', required: ['role'], additionalProperties: false, properties: { role: { type: 'string', enum: ROLES } } } as const

function isOwner(p: Principal): boolean {
  return p.kind === 'session' ? p.role === 'owner' : p.permissionSet === 'full_access'
}

function assertOwnerFor(p: Principal, what: string): void {
  if (!isOwner(p)) throw apiError('permission_denied', `only owners can ${what}`)
}

/** The org in the path must be the caller's: any other id is reported as not found. */
function ownOrg(request: FastifyRequest<{ Params: { id: string } }>): string {
  const orgId = request.principal!.org.id
  if (request.params.id !== orgId) throw notFound('org')
  return orgId
}

export async function orgRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  readRoutes(app, deps)
  membershipChangeRoutes(app, deps)
}

/** The caller (`/me`) and an org's memberships. */
function readRoutes(app: FastifyInstance, deps: ServerDeps): void {
  app.get(
    '/me',
    {
      config: { permission: null },
      schema: {
        response: {
          200: meSchema,
        },
      },
    },
    async (request) => {
      const p = request.principal!
      return {
        org: { id: p.org.id, name: p.org.name, posture: p.org.posture },
        kind: p.kind,
        user_id: p.userId,
        permissions: [...p.permissions],
        ...(p.email ? { email: p.email } : {}),
        ...(p.role ? { role: p.role } : {}),
        ...(p.keyId ? { key_id: p.keyId } : {}),
        ...(p.permissionSet ? { permission_set: p.permissionSet } : {}),
      }
    },
  )

  app.get<{ Params: { id: string } }>(
    '/orgs/:id/memberships',
    {
      config: { permission: AUTH_ANY },
      schema: { params: orgParams, response: { 200: { type: 'object', required: ['memberships'], properties: { memberships: { type: 'array', items: membershipSchema } } } } },
    },
    async (request) => ({ memberships: await deps.store.memberships.list(ownOrg(request)) }),
  )
}

/** Invite, change the role of, and remove a member; each change is a membership_* audit event. */
function membershipChangeRoutes(app: FastifyInstance, deps: ServerDeps): void {
  const event = (request: FastifyRequest, type: 'membership_invited' | 'membership_updated' | 'membership_removed', detail: Record<string, unknown>) =>
    ({ org_id: request.principal!.org.id, user_id: request.principal!.userId, event_type: type, detail })

  app.post<{ Params: { id: string }; Body: { email: string; role: Role } }>(
    '/orgs/:id/memberships',
    { config: { permission: AUTH_WRITE }, schema: { params: orgParams, body: inviteBody, response: { 201: membershipSchema } } },
    async (request, reply) => {
      const orgId = ownOrg(request)
      const p = request.principal!
      if (request.body.role === 'owner') assertOwnerFor(p, 'invite owners')
      const user = await deps.store.users.create({ email: request.body.email })
      const membership = await auditedMutation(deps.store, deps.audit, async (tx, record) => {
        const invited = await tx.memberships.invite(orgId, {
          user_id: user.id,
          email: user.email,
          role: request.body.role,
          invited_by: p.kind === 'session' ? p.userId : undefined,
        })
        if (invited) record(event(request, 'membership_invited', { resource_id: user.id, email: invited.email, role: invited.role, invitation_id: invited.invitation_id }))
        return invited
      })
      if (!membership) throw apiError('conflict', `${user.email} already has a membership in this org`, { fields: { email: 'already a member or invited' } })
      reply.code(201)
      return membership
    },
  )

  app.patch<{ Params: { id: string; user_id: string }; Body: { role: Role } }>(
    '/orgs/:id/memberships/:user_id',
    { config: { permission: AUTH_WRITE }, schema: { params: memberParams, body: updateBody, response: { 200: membershipSchema } } },
    async (request) => {
      const orgId = ownOrg(request)
      const current = await deps.store.memberships.get(orgId, request.params.user_id)
      if (!current) throw notFound('membership')
      if (current.role === 'owner' || request.body.role === 'owner') assertOwnerFor(request.principal!, 'grant or change the owner role')
      const change = await auditedMutation(deps.store, deps.audit, async (tx, record) => {
        const change = await tx.memberships.updateRoleUnlessLastOwner(orgId, current.user_id, request.body.role)
        if (change.ok && change.from_role !== change.membership.role) {
          const m = change.membership
          record(event(request, 'membership_updated', { resource_id: m.user_id, email: m.email, from_role: change.from_role, to_role: m.role }))
        }
        return change
      })
      return guarded(change)
    },
  )

  app.delete<{ Params: { id: string; user_id: string } }>(
    '/orgs/:id/memberships/:user_id',
    { config: { permission: AUTH_WRITE }, schema: { params: memberParams, response: { 200: statusOnly('removed') } } },
    async (request) => {
      const orgId = ownOrg(request)
      const current = await deps.store.memberships.get(orgId, request.params.user_id)
      if (!current) throw notFound('membership')
      if (current.role === 'owner') assertOwnerFor(request.principal!, 'remove an owner')
      // The membership and the member's personal credentials go in one transaction (docs/credentials.md "Reaping").
      const p = request.principal!
      await auditedMutation(deps.store, deps.audit, async (tx, record) => {
        const change = await tx.memberships.removeUnlessLastOwner(orgId, current.user_id)
        const membership = guarded(change)
        const reaped = await reapPersonalCredentials(tx, record, { orgId, userId: p.userId }, current.user_id)
        record(event(request, 'membership_removed', {
          resource_id: membership.user_id,
          email: membership.email,
          role: membership.role,
          was_pending: membership.status === 'pending',
          credentials_reaped: reaped.length,
        }))
      })
      return { status: 'removed' }
    },
  )
}

function guarded(change: GuardedChange): Membership {
  if (change.ok) return change.membership
  if (change.reason === 'last_owner') throw apiError('last_owner', 'the org must keep at least one active owner')
  throw notFound('membership')
}
