import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../helpers/dialects.js'
import { createHarness, type Harness } from './harness.js'

for (const d of testDialects()) describe(`API key routes [${d.name}]`, () => {
  let h: Harness
  beforeAll(async () => {
    h = await createHarness({ open: d.open })
  })
  afterAll(() => h.close())

  it('creates a key whose value is returned once, works at once, and lists without secrets', async () => {
    const { ownerToken, ownerId, orgId } = await h.newOrg()
    const created = await h.inject('POST', '/v1/api-keys', { token: ownerToken, body: { label: 'ci', permission_set: 'read_only' } })
    expect(created.status).toBe(201)
    expect(created.body).toMatchObject({ label: 'ci', permission_set: 'read_only', created_by_user_id: ownerId })
    expect(created.body.value).toMatch(/^crl_/)
    expect(created.body.prefix).not.toBe(created.body.value)

    const me = await h.inject('GET', '/v1/me', { token: created.body.value })
    expect(me.status).toBe(200)
    expect(me.body).toMatchObject({ kind: 'api_key', user_id: 'system', org: { id: orgId }, permission_set: 'read_only' })

    const list = await h.inject('GET', '/v1/api-keys', { token: ownerToken })
    expect(list.status).toBe(200)
    const row = list.body.api_keys.find((k: { id: string }) => k.id === created.body.id)
    expect(row).toMatchObject({ id: created.body.id, prefix: created.body.prefix })
    expect(row.value).toBeUndefined()
    expect(list.raw).not.toContain(created.body.value)
    expect(list.raw).not.toContain('secret_hash')
  })

  it('records api_key_created and api_key_revoked with the spec detail keys and no secret', async () => {
    const { ownerKey, orgId } = await h.newOrg()
    const created = await h.inject('POST', '/v1/api-keys', { token: ownerKey, body: { label: 'audit me', permission_set: 'submit_observe' } })
    const revoked = await h.inject('DELETE', `/v1/api-keys/${created.body.id}`, { token: ownerKey })
    expect(revoked.status).toBe(200)
    expect(revoked.body).toEqual({ status: 'revoked' })
    await h.audit.flush()
    const page = await h.inject('GET', '/v1/audit?filter=event_type=api_key_created,api_key_revoked&order=asc', { token: ownerKey })
    expect(page.status).toBe(200)
    expect(page.body.events.map((e: { event_type: string }) => e.event_type)).toEqual(['api_key_created', 'api_key_revoked'])
    for (const e of page.body.events) {
      expect(e).toMatchObject({ org_id: orgId, user_id: 'system', category: 'audit', actor: 'control-plane' })
      expect(e.detail).toEqual({ resource_id: created.body.id, label: 'audit me', prefix: created.body.prefix, permission_set: 'submit_observe' })
    }
    expect(page.raw).not.toContain(created.body.value)
  })

  it('revocation gives 401 on the very next request, even after the key was cached', async () => {
    const { ownerKey } = await h.newOrg()
    const created = await h.inject('POST', '/v1/api-keys', { token: ownerKey, body: { label: 'leaky', permission_set: 'read_only' } })
    expect((await h.inject('GET', '/v1/me', { token: created.body.value })).status).toBe(200) // now cached
    expect((await h.inject('DELETE', `/v1/api-keys/${created.body.id}`, { token: ownerKey })).status).toBe(200)
    const after = await h.inject('GET', '/v1/me', { token: created.body.value })
    expect(after.status).toBe(401)
    expect(after.body.error.code).toBe('unauthenticated')
    expect((await h.inject('DELETE', `/v1/api-keys/${created.body.id}`, { token: ownerKey })).status).toBe(404)
  })

  it('updates last_used_at', async () => {
    const { ownerKey, orgId } = await h.newOrg()
    const k = await h.key(orgId, 'read_only')
    await h.inject('GET', '/v1/me', { token: k.value })
    await new Promise((r) => setTimeout(r, 50))
    expect((await h.store.apiKeys.get(orgId, k.id))?.last_used_at).toBeDefined()
    const list = await h.inject('GET', '/v1/api-keys', { token: ownerKey })
    expect(list.body.api_keys.find((x: { id: string }) => x.id === k.id).last_used_at).toMatch(/^\d{4}-/)
  })

  it.each([
    ['a missing label', { permission_set: 'read_only' }, 'label'],
    ['an empty label', { label: '', permission_set: 'read_only' }, 'label'],
    ['a 101-character label', { label: 'x'.repeat(101), permission_set: 'read_only' }, 'label'],
    ['a numeric label', { label: 42, permission_set: 'read_only' }, 'label'],
    ['an unknown permission set', { label: 'x', permission_set: 'root' }, 'permission_set'],
    ['an unknown field', { label: 'x', permission_set: 'read_only', admin: true }, 'admin'],
  ])('refuses %s with validation_error and creates nothing', async (_name, body, field) => {
    const { ownerKey, orgId } = await h.newOrg()
    const before = (await h.store.apiKeys.list(orgId)).length
    const res = await h.inject('POST', '/v1/api-keys', { token: ownerKey, body })
    expect(res.status).toBe(400)
    expect(res.body.error.code).toBe('validation_error')
    expect(res.body.error.details.fields).toHaveProperty(field)
    expect(res.body.error.request_id).toBe(res.headers['x-request-id'])
    expect((await h.store.apiKeys.list(orgId)).length).toBe(before)
  })

  it('accepts a label of exactly 100 characters', async () => {
    const { ownerKey } = await h.newOrg()
    const res = await h.inject('POST', '/v1/api-keys', { token: ownerKey, body: { label: 'x'.repeat(100), permission_set: 'read_only' } })
    expect(res.status).toBe(201)
  })

  it('refuses malformed JSON with the envelope', async () => {
    const { ownerKey } = await h.newOrg()
    const res = await h.inject('POST', '/v1/api-keys', { token: ownerKey, payload: '{"label": "x",' })
    expect(res.status).toBe(400)
    expect(res.body.error).toMatchObject({ code: 'validation_error', details: { fields: { body: 'is not valid JSON' } } })
  })

  it('enforces apikeys:write and keeps full_access keys for owners', async () => {
    const { orgId } = await h.newOrg()
    const ro = await h.key(orgId, 'read_only')
    const denied = await h.inject('POST', '/v1/api-keys', { token: ro.value, body: { label: 'x', permission_set: 'read_only' } })
    expect(denied.status).toBe(403)
    expect(denied.body.error.code).toBe('permission_denied')
    const admin = await h.member(orgId, 'admin')
    expect((await h.inject('POST', '/v1/api-keys', { token: admin.token, body: { label: 'x', permission_set: 'full_access' } })).status).toBe(403)
    expect((await h.inject('POST', '/v1/api-keys', { token: admin.token, body: { label: 'x', permission_set: 'submit_observe' } })).status).toBe(201)
    const member = await h.member(orgId, 'member')
    expect((await h.inject('GET', '/v1/api-keys', { token: member.token })).status).toBe(403)
  })

  it('reports another org\'s key as not found and leaves it alone', async () => {
    const a = await h.newOrg()
    const b = await h.newOrg()
    const bKey = await h.key(b.orgId, 'read_only')
    const res = await h.inject('DELETE', `/v1/api-keys/${bKey.id}`, { token: a.ownerKey })
    expect(res.status).toBe(404)
    expect(res.body.error.code).toBe('not_found')
    expect((await h.inject('GET', '/v1/me', { token: bKey.value })).status).toBe(200)
  })
})
