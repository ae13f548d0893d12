// /v1/credentials with personal credentials (docs/credentials.md "Personal credentials"): who may
// create, list, read and delete which rows (auth:write vs auth:write:own), and reaping on
// membership removal (docs/credentials.md "Reaping"), on SQLite and PostgreSQL.
import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Sealer } from '../../src/secrets/index.js'
import { testDialects } from '../helpers/dialects.js'
import { createHarness, type Harness } from './harness.js'

const TOKEN = 'ghp_personal_secret_value_0123'

for (const d of testDialects()) describe(`personal credentials and reaping [${d.name}]`, () => {
  let h: Harness
  beforeAll(async () => {
    h = await createHarness({ open: d.open, sealer: new Sealer(randomBytes(32)) })
  })
  afterAll(() => h.close())

  const events = async (token: string, type: string) => {
    await h.audit.flush()
    return (await h.inject('GET', `/v1/audit?filter=event_type=${type}&order=asc`, { token })).body.events as Array<Record<string, any>>
  }
  const create = (token: string, body: Record<string, unknown>) =>
    h.inject('POST', '/v1/credentials', { token, body: { provider: 'github', kind: 'static_token', token: TOKEN, ...body } })

  it('a member creates, lists, reads and deletes only their own personal credentials', async () => {
    const { orgId, ownerToken } = await h.newOrg()
    const alice = await h.member(orgId, 'member')
    const bob = await h.member(orgId, 'member')

    const orgCred = await create(ownerToken, { name: 'github' })
    expect(orgCred.status).toBe(201)
    expect(orgCred.body.owner_user_id).toBeUndefined()

    const refused = await create(alice.token, { name: 'github' })
    expect(refused.status).toBe(403)
    expect(refused.body.error.code).toBe('permission_denied')

    const mine = await create(alice.token, { name: 'github', personal: true })
    expect(mine.status).toBe(201)
    expect(mine.body).toMatchObject({ name: 'github', provider: 'github', kind: 'static_token', status: 'active', owner_user_id: alice.userId, created_by_user_id: alice.userId })
    expect(mine.raw).not.toContain(TOKEN)
    const bobs = await create(bob.token, { name: 'github', personal: true })
    expect(bobs.status).toBe(201)
    const dup = await create(alice.token, { name: 'github', personal: true })
    expect(dup.status).toBe(409)
    expect(dup.body.error.code).toBe('conflict')

    const aliceList = await h.inject('GET', '/v1/credentials', { token: alice.token })
    expect(aliceList.status).toBe(200)
    expect(aliceList.body.credentials.map((c: any) => c.id)).toEqual([mine.body.id])
    const all = await h.inject('GET', '/v1/credentials', { token: ownerToken })
    expect(all.body.credentials.map((c: any) => c.owner_user_id ?? null).sort()).toEqual([alice.userId, bob.userId, null].sort())
    expect(all.raw).not.toContain(TOKEN)

    expect((await h.inject('GET', `/v1/credentials/${mine.body.id}`, { token: alice.token })).body).toEqual(mine.body)
    for (const target of [bobs.body.id, orgCred.body.id]) {
      const get = await h.inject('GET', `/v1/credentials/${target}`, { token: alice.token })
      expect(get.status).toBe(403)
      expect(get.body.error.code).toBe('permission_denied')
      const del = await h.inject('DELETE', `/v1/credentials/${target}`, { token: alice.token })
      expect(del.status).toBe(403)
      expect(del.body.error.code).toBe('permission_denied')
    }
    expect((await h.inject('GET', '/v1/credentials/cred_nope', { token: alice.token })).status).toBe(404)

    expect((await h.inject('DELETE', `/v1/credentials/${mine.body.id}`, { token: alice.token })).body).toEqual({ status: 'deleted' })
    // auth:write manages every member's: the owner deletes Bob's.
    expect((await h.inject('DELETE', `/v1/credentials/${bobs.body.id}`, { token: ownerToken })).status).toBe(200)
    expect((await h.inject('GET', '/v1/credentials', { token: ownerToken })).body.credentials.map((c: any) => c.id)).toEqual([orgCred.body.id])

    const created = await events(ownerToken, 'credential_created')
    expect(created.find((e) => e.detail.resource_id === mine.body.id)).toMatchObject({
      user_id: alice.userId, detail: { name: 'github', provider: 'github', kind: 'static_token', scopes: [], status: 'active', owner_user_id: alice.userId },
    })
    const deleted = await events(ownerToken, 'credential_deleted')
    expect(deleted.map((e) => [e.user_id, e.detail.owner_user_id])).toEqual([[alice.userId, alice.userId], [expect.any(String), bob.userId]])
  })

  it('another org’s credential is not found; an API key holds no personal credentials', async () => {
    const a = await h.newOrg()
    const b = await h.newOrg()
    const theirs = await create(b.ownerToken, { name: 'gh', personal: true })
    expect(theirs.status).toBe(201)
    expect((await h.inject('GET', `/v1/credentials/${theirs.body.id}`, { token: a.ownerToken })).status).toBe(404)
    expect((await h.inject('DELETE', `/v1/credentials/${theirs.body.id}`, { token: a.ownerToken })).status).toBe(404)
    const byKey = await create(a.ownerKey, { name: 'gh', personal: true })
    expect(byKey.status).toBe(400)
    expect(byKey.body.error).toMatchObject({ code: 'validation_error', details: { fields: { personal: expect.any(String) } } })
    const ro = await h.key(a.orgId, 'read_only')
    expect((await h.inject('GET', '/v1/credentials', { token: ro.value })).status).toBe(403)
  })

  it('removing a membership reaps that member’s personal credentials, with one credential_deleted each', async () => {
    const { orgId, ownerToken } = await h.newOrg()
    const carol = await h.member(orgId, 'member')
    const dave = await h.member(orgId, 'member')
    const orgCred = await create(ownerToken, { name: 'github' })
    const c1 = await create(carol.token, { name: 'github', personal: true })
    const c2 = await create(carol.token, { name: 'npm-token', provider: 'npm', personal: true })
    const d1 = await create(dave.token, { name: 'github', personal: true })
    expect([orgCred.status, c1.status, c2.status, d1.status]).toEqual([201, 201, 201, 201])

    expect((await h.inject('DELETE', `/v1/orgs/${orgId}/memberships/${carol.userId}`, { token: ownerToken })).status).toBe(200)
    const [removed] = (await events(ownerToken, 'membership_removed')).filter((e) => e.detail.resource_id === carol.userId)
    expect(removed.detail).toMatchObject({ credentials_reaped: 2, was_pending: false, role: 'member' })
    const reaped = (await events(ownerToken, 'credential_deleted')).filter((e) => e.detail.owner_user_id === carol.userId)
    expect(reaped.map((e) => e.detail)).toEqual([
      { resource_id: c1.body.id, name: 'github', provider: 'github', kind: 'static_token', owner_user_id: carol.userId, reason: 'membership_removed' },
      { resource_id: c2.body.id, name: 'npm-token', provider: 'npm', kind: 'static_token', owner_user_id: carol.userId, reason: 'membership_removed' },
    ])
    const left = (await h.inject('GET', '/v1/credentials', { token: ownerToken })).body.credentials.map((c: any) => c.id).sort()
    expect(left).toEqual([orgCred.body.id, d1.body.id].sort())

    // Dave's one is reaped with him; a member without any reaps nothing.
    expect((await h.inject('DELETE', `/v1/orgs/${orgId}/memberships/${dave.userId}`, { token: ownerToken })).status).toBe(200)
    const removedDave = (await events(ownerToken, 'membership_removed')).find((e) => e.detail.resource_id === dave.userId)
    expect(removedDave?.detail.credentials_reaped).toBe(1)
    const eve = await h.member(orgId, 'member')
    expect((await h.inject('DELETE', `/v1/orgs/${orgId}/memberships/${eve.userId}`, { token: ownerToken })).status).toBe(200)
    expect((await events(ownerToken, 'membership_removed')).find((e) => e.detail.resource_id === eve.userId)?.detail.credentials_reaped).toBe(0)
  })

  it('the last owner is not removed and keeps their personal credentials', async () => {
    const { orgId, ownerToken, ownerId } = await h.newOrg()
    const mine = await create(ownerToken, { name: 'gh', personal: true })
    const res = await h.inject('DELETE', `/v1/orgs/${orgId}/memberships/${ownerId}`, { token: ownerToken })
    expect(res.body.error.code).toBe('last_owner')
    expect((await h.inject('GET', `/v1/credentials/${mine.body.id}`, { token: ownerToken })).status).toBe(200)
  })
})
