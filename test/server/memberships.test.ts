import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { signWebhook } from '../../src/server/webhook-signature.js'
import { testDialects } from '../helpers/dialects.js'
import { createHarness, type Harness } from './harness.js'

for (const d of testDialects()) describe(`membership routes and the invite-accepted webhook [${d.name}]`, () => {
  let h: Harness
  beforeAll(async () => {
    h = await createHarness({ open: d.open })
  })
  afterAll(() => h.close())

  const events = async (token: string, type: string) => {
    await h.audit.flush()
    return (await h.inject('GET', `/v1/audit?filter=event_type=${type}&order=asc`, { token })).body.events as Array<Record<string, any>>
  }

  let delivery = 0
  const deliver = (body: unknown, o: { secret?: string; ts?: number; id?: string } = {}) => {
    const raw = JSON.stringify(body)
    const ts = o.ts ?? Math.floor(Date.now() / 1000)
    return h.inject('POST', '/v1/webhooks/identity/invite-accepted', {
      payload: raw,
      headers: {
        'corral-webhook-id': o.id ?? `dlv_${++delivery}_${Date.now()}`,
        'corral-webhook-timestamp': String(ts),
        'corral-webhook-signature': signWebhook(o.secret ?? 'whsec_test', ts, raw),
      },
    })
  }

  it('invites, accepts through the signed webhook, and records first_seen once', async () => {
    const { orgId, ownerToken } = await h.newOrg()
    const invited = await h.inject('POST', `/v1/orgs/${orgId}/memberships`, { token: ownerToken, body: { email: 'New.Person@Example.com', role: 'member' } })
    expect(invited.status).toBe(201)
    expect(invited.body).toMatchObject({ org_id: orgId, email: 'new.person@example.com', role: 'member', status: 'pending' })
    const { user_id: userId, invitation_id: invitationId } = invited.body

    // A pending member cannot sign in yet.
    const early = await h.builtin.issue({ userId, orgId })
    expect((await h.inject('GET', '/v1/me', { token: early })).status).toBe(401)

    const accepted = await deliver({ invitation_id: invitationId, user_id: 'idp_user_42', email: 'new.person@example.com' })
    expect(accepted.status).toBe(200)
    expect(accepted.body).toEqual({ status: 'accepted' })
    // A redelivery under a new id changes nothing and records nothing new.
    expect((await deliver({ invitation_id: invitationId })).status).toBe(200)

    const token = await h.builtin.issue({ userId, orgId })
    expect((await h.inject('GET', '/v1/me', { token })).status).toBe(200)
    expect((await h.inject('GET', '/v1/me', { token })).status).toBe(200)

    const [inv] = await events(ownerToken, 'membership_invited')
    expect(inv.detail).toEqual({ resource_id: userId, email: 'new.person@example.com', role: 'member', invitation_id: invitationId })
    const acc = await events(ownerToken, 'membership_accepted')
    expect(acc).toHaveLength(1)
    expect(acc[0]).toMatchObject({ user_id: 'system', detail: { resource_id: userId, email: 'new.person@example.com', role: 'member', workos_user_id: 'idp_user_42', invitation_id: invitationId } })
    const seen = await events(ownerToken, 'membership_first_seen')
    expect(seen.filter((e) => e.detail.resource_id === userId)).toEqual([
      expect.objectContaining({ user_id: userId, detail: { resource_id: userId, email: 'new.person@example.com', role: 'member', source: 'self_heal' } }),
    ])
  })

  it('refuses unsigned, wrongly signed, stale and replayed webhooks', async () => {
    const { orgId, ownerToken } = await h.newOrg()
    const invited = await h.inject('POST', `/v1/orgs/${orgId}/memberships`, { token: ownerToken, body: { email: 'w@example.com', role: 'member' } })
    const body = { invitation_id: invited.body.invitation_id }
    const unsigned = await h.inject('POST', '/v1/webhooks/identity/invite-accepted', { body })
    expect(unsigned.status).toBe(401)
    expect(unsigned.body.error.code).toBe('invalid_signature')
    expect((await deliver(body, { secret: 'wrong' })).status).toBe(401)
    expect((await deliver(body, { ts: Math.floor(Date.now() / 1000) - 600 })).status).toBe(401)
    expect((await h.store.memberships.get(orgId, invited.body.user_id))?.status).toBe('pending')
    expect((await deliver(body, { id: 'dlv_once' })).status).toBe(200)
    const replay = await deliver(body, { id: 'dlv_once' })
    expect(replay.status).toBe(401)
    expect(replay.body.error.message).toContain('replay')
    expect((await deliver({ invitation_id: 'inv_nope' })).status).toBe(404)
  })

  it('updates and removes members with events, and protects the last owner', async () => {
    const { orgId, ownerToken, ownerId } = await h.newOrg()
    const email = `m-${Date.now()}@example.com`
    const m = await h.member(orgId, 'member', email)
    const up = await h.inject('PATCH', `/v1/orgs/${orgId}/memberships/${m.userId}`, { token: ownerToken, body: { role: 'admin' } })
    expect(up.status).toBe(200)
    expect(up.body.role).toBe('admin')
    const [upd] = await events(ownerToken, 'membership_updated')
    expect(upd.detail).toMatchObject({ resource_id: m.userId, from_role: 'member', to_role: 'admin' })

    const demote = await h.inject('PATCH', `/v1/orgs/${orgId}/memberships/${ownerId}`, { token: ownerToken, body: { role: 'member' } })
    expect(demote.status).toBe(409)
    expect(demote.body.error.code).toBe('last_owner')
    const removeOwner = await h.inject('DELETE', `/v1/orgs/${orgId}/memberships/${ownerId}`, { token: ownerToken })
    expect(removeOwner.status).toBe(409)
    expect(removeOwner.body.error.code).toBe('last_owner')

    const rm = await h.inject('DELETE', `/v1/orgs/${orgId}/memberships/${m.userId}`, { token: ownerToken })
    expect(rm.status).toBe(200)
    const [removed] = await events(ownerToken, 'membership_removed')
    expect(removed.detail).toEqual({ resource_id: m.userId, email, role: 'admin', was_pending: false, credentials_reaped: 0 })
    expect((await h.inject('DELETE', `/v1/orgs/${orgId}/memberships/${m.userId}`, { token: ownerToken })).status).toBe(404)
  })

  it('never lets concurrent demotions leave the org without an owner', async () => {
    const { orgId, ownerToken, ownerId } = await h.newOrg()
    const second = await h.member(orgId, 'owner')
    const results = await Promise.all([
      h.inject('PATCH', `/v1/orgs/${orgId}/memberships/${ownerId}`, { token: ownerToken, body: { role: 'member' } }),
      h.inject('PATCH', `/v1/orgs/${orgId}/memberships/${second.userId}`, { token: second.token, body: { role: 'member' } }),
    ])
    expect(results.map((r) => r.status).sort()).toEqual([200, 409])
    expect(await h.store.memberships.countOwners(orgId)).toBe(1)
  })

  it('keeps owner-only acts for owners', async () => {
    const { orgId, ownerId } = await h.newOrg()
    const admin = await h.member(orgId, 'admin')
    expect((await h.inject('POST', `/v1/orgs/${orgId}/memberships`, { token: admin.token, body: { email: 'boss@example.com', role: 'owner' } })).status).toBe(403)
    expect((await h.inject('DELETE', `/v1/orgs/${orgId}/memberships/${ownerId}`, { token: admin.token })).status).toBe(403)
    expect((await h.inject('POST', `/v1/orgs/${orgId}/memberships`, { token: admin.token, body: { email: 'dev@example.com', role: 'member' } })).status).toBe(201)
    const member = await h.member(orgId, 'member')
    expect((await h.inject('GET', `/v1/orgs/${orgId}/memberships`, { token: member.token })).status).toBe(200)
    expect((await h.inject('POST', `/v1/orgs/${orgId}/memberships`, { token: member.token, body: { email: 'x@example.com', role: 'member' } })).status).toBe(403)
  })

  it('reports other orgs as not found, refuses duplicates and bad input without changes', async () => {
    const a = await h.newOrg()
    const b = await h.newOrg()
    expect((await h.inject('GET', `/v1/orgs/${b.orgId}/memberships`, { token: a.ownerToken })).status).toBe(404)
    expect((await h.inject('DELETE', `/v1/orgs/${b.orgId}/memberships/${b.ownerId}`, { token: a.ownerToken })).status).toBe(404)
    expect((await h.inject('PATCH', `/v1/orgs/${a.orgId}/memberships/${b.ownerId}`, { token: a.ownerToken, body: { role: 'member' } })).status).toBe(404)
    const dup = await h.inject('POST', `/v1/orgs/${a.orgId}/memberships`, { token: a.ownerToken, body: { email: (await h.store.users.get(a.ownerId))!.email, role: 'member' } })
    expect(dup.status).toBe(409)
    for (const body of [{ email: 'not-an-email', role: 'member' }, { email: 'a@b.co', role: 'god' }, { email: 'a@b.co' }, { email: 7, role: 'member' }]) {
      const res = await h.inject('POST', `/v1/orgs/${a.orgId}/memberships`, { token: a.ownerToken, body })
      expect(res.status).toBe(400)
      expect(res.body.error.code).toBe('validation_error')
    }
    const list = await h.inject('GET', `/v1/orgs/${a.orgId}/memberships`, { token: a.ownerToken })
    expect(list.body.memberships).toHaveLength(1)
  })
})
