import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BuiltinIdentityProvider } from '../../src/server/identity/index.js'
import { openSibling, testDialects } from '../helpers/dialects.js'
import { createHarness, type Harness } from './harness.js'

for (const d of testDialects()) {
  describe(`auth [${d.name}]`, () => {
    let h: Harness
    beforeAll(async () => {
      h = await createHarness({ open: d.open })
    })
    afterAll(() => h.close())

    it.each([
      ['no Authorization header', {}],
      ['a non-bearer scheme', { authorization: 'Basic dXNlcjpwYXNz' }],
      ['an unknown API key', { authorization: 'Bearer crl_thisKeyDoesNotExist0000000000000000000000' }],
      ['garbage', { authorization: 'Bearer not.a.jwt' }],
    ])('refuses %s with 401 and the envelope', async (_name, headers) => {
      const res = await h.inject('GET', '/v1/me', { headers })
      expect(res.status).toBe(401)
      expect(res.body.error.code).toBe('unauthenticated')
      expect(res.body.error.request_id).toMatch(/^req_[0-9a-f]{32}$/)
      expect(res.headers['x-request-id']).toBe(res.body.error.request_id)
    })

    it('accepts a session token and attributes writes to the user', async () => {
      const { orgId, ownerToken, ownerId } = await h.newOrg()
      const me = await h.inject('GET', '/v1/me', { token: ownerToken })
      expect(me.body).toMatchObject({ kind: 'session', user_id: ownerId, role: 'owner', org: { id: orgId } })
      const created = await h.inject('POST', '/v1/api-keys', { token: ownerToken, body: { label: 'by session', permission_set: 'read_only' } })
      expect(created.status).toBe(201)
      await h.audit.flush()
      const page = await h.inject('GET', '/v1/audit?filter=event_type=api_key_created', { token: ownerToken })
      expect(page.body.events[0].user_id).toBe(ownerId)
    })

    it('refuses expired, forged and tampered session tokens', async () => {
      const { orgId, ownerId } = await h.newOrg()
      const expired = await h.builtin.issue({ userId: ownerId, orgId }, -5)
      expect((await h.inject('GET', '/v1/me', { token: expired })).status).toBe(401)
      const stranger = await BuiltinIdentityProvider.open({ setIfAbsent: async (_k, v) => v })
      const forged = await stranger.issue({ userId: ownerId, orgId })
      expect((await h.inject('GET', '/v1/me', { token: forged })).status).toBe(401)
      const other = await h.newOrg()
      const good = await h.builtin.issue({ userId: ownerId, orgId })
      const [head, , sig] = good.split('.')
      const claims = Buffer.from(JSON.stringify({ sub: ownerId, org_id: other.orgId, iss: 'urn:corral:identity', aud: 'urn:corral:api', exp: 9_999_999_999 })).toString('base64url')
      expect((await h.inject('GET', '/v1/me', { token: `${head}.${claims}.${sig}` })).status).toBe(401)
    })

    it('refuses a session for an org the user is not a member of, and one whose membership was removed', async () => {
      const a = await h.newOrg()
      const b = await h.newOrg()
      const crossOrg = await h.builtin.issue({ userId: a.ownerId, orgId: b.orgId })
      expect((await h.inject('GET', '/v1/me', { token: crossOrg })).status).toBe(401)
      const m = await h.member(a.orgId, 'member')
      expect((await h.inject('GET', '/v1/me', { token: m.token })).status).toBe(200)
      expect((await h.inject('DELETE', `/v1/orgs/${a.orgId}/memberships/${m.userId}`, { token: a.ownerToken })).status).toBe(200)
      expect((await h.inject('GET', '/v1/me', { token: m.token })).status).toBe(401)
    })

    it('a key revoked through one replica is refused at once by another that had it cached', async () => {
      const replica = await createHarness({ open: () => openSibling(h.store) })
      try {
        const { ownerKey, orgId } = await h.newOrg()
        const k = await h.key(orgId, 'read_only')
        expect((await replica.inject('GET', '/v1/me', { token: k.value })).status).toBe(200) // cached on the replica
        expect((await h.inject('DELETE', `/v1/api-keys/${k.id}`, { token: ownerKey })).status).toBe(200)
        let status = 0
        // NOTIFY is asynchronous across connections: allow it a moment to arrive, never forever.
        for (let i = 0; i < 50 && status !== 401; i++) {
          status = (await replica.inject('GET', '/v1/me', { token: k.value })).status
          if (status !== 401) await new Promise((r) => setTimeout(r, 20))
        }
        expect(status).toBe(401)
      } finally {
        await replica.close()
      }
    })

    it('lets read_only keys read but not write, and reports permission_denied', async () => {
      const { orgId } = await h.newOrg()
      const ro = await h.key(orgId, 'read_only')
      expect((await h.inject('GET', '/v1/audit', { token: ro.value })).status).toBe(200)
      const res = await h.inject('POST', `/v1/orgs/${orgId}/memberships`, { token: ro.value, body: { email: 'x@example.com', role: 'member' } })
      expect(res.status).toBe(403)
      expect(res.body.error.code).toBe('permission_denied')
    })
  })
}
