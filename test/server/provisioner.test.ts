import { describe, expect, it } from 'vitest'
import { CorralError } from '../../src/contract/index.js'
import type { ApiKeyProvisioner } from '../../src/server/identity/index.js'
import { createHarness } from './harness.js'

// Keys are minted and revoked through the identity provider's provisioner, then mirrored locally
// (spec: DELETE calls the provider's delete, then deletes the mirror, then evicts the cache).
describe('API keys through an identity-provider provisioner', () => {
  it('mints with the provider, revokes there first, and keeps the mirror when the provider fails', async () => {
    const calls: string[] = []
    let failRevoke = false
    const keys: ApiKeyProvisioner = {
      async mint(orgId, input) {
        calls.push(`mint ${orgId} ${input.label}`)
        return { value: `crl_fromidp${Date.now()}${Math.random().toString(36).slice(2)}` }
      },
      async revoke(orgId, keyId) {
        calls.push(`revoke ${orgId} ${keyId}`)
        if (failRevoke) throw new CorralError('service_unavailable', 'identity provider unreachable', 503)
      },
    }
    const h = await createHarness({ keys })
    try {
      const { orgId, ownerKey } = await h.newOrg()
      const created = await h.inject('POST', '/v1/api-keys', { token: ownerKey, body: { label: 'idp', permission_set: 'read_only' } })
      expect(created.status).toBe(201)
      expect(created.body.value).toMatch(/^crl_fromidp/)
      expect((await h.inject('GET', '/v1/me', { token: created.body.value })).status).toBe(200)

      failRevoke = true
      const failed = await h.inject('DELETE', `/v1/api-keys/${created.body.id}`, { token: ownerKey })
      expect(failed.status).toBe(503)
      expect(await h.store.apiKeys.get(orgId, created.body.id)).toBeDefined()

      failRevoke = false
      expect((await h.inject('DELETE', `/v1/api-keys/${created.body.id}`, { token: ownerKey })).status).toBe(200)
      expect((await h.inject('GET', '/v1/me', { token: created.body.value })).status).toBe(401)
      expect(calls).toEqual([`mint ${orgId} idp`, `revoke ${orgId} ${created.body.id}`, `revoke ${orgId} ${created.body.id}`])
    } finally {
      await h.close()
    }
  })
})
