// GET /v1/proxy/ca and POST /v1/workspaces/{id}/proxy-token over the real app and store (the API
// side of `corral ca export` and `corral admin proxy-token`): the certificate only; a token minted
// only for an unscoped workspace:write caller, for a workspace of the caller's org, verifiable by
// the proxy's own check, audited without the token; refusals as envelopes; 503 without a proxy.
import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CapabilityTokens } from '../../src/secrets/index.js'
import { createHarness, type Harness } from './harness.js'

describe('proxy access routes', () => {
  let h: Harness
  let org: Awaited<ReturnType<Harness['newOrg']>>
  const tokens = new CapabilityTokens(new Uint8Array(randomBytes(32)))
  const owned = new Map<string, { org: string; created_by: string }>()

  beforeAll(async () => {
    h = await createHarness({ workspaces: { get: async (o, id) => (owned.get(id)?.org === o ? { id, created_by: owned.get(id)!.created_by } : undefined) } })
    org = await h.newOrg()
    owned.set('ws_mine', { org: org.orgId, created_by: 'someone' })
  })
  afterAll(() => h?.close())

  it('503 service_unavailable while the server runs no proxy', async () => {
    const r = await h.inject('GET', '/v1/proxy/ca', { token: org.ownerKey })
    expect(r.status).toBe(503)
    expect(r.body.error.code).toBe('service_unavailable')
  })

  it('the CA certificate for any workspace reader; never a key', async () => {
    h.deps.proxyAccess = { caPem: '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n', caFingerprint: 'AB:CD', tokens }
    const ro = await h.key(org.orgId, 'read_only')
    const r = await h.inject('GET', '/v1/proxy/ca', { token: ro.value })
    expect(r.status).toBe(200)
    expect(r.body).toEqual({ pem: expect.stringMatching(/^-----BEGIN CERTIFICATE-----/), fingerprint_sha256: 'AB:CD' })
    expect((await h.inject('GET', '/v1/proxy/ca')).status).toBe(401)
  })

  it('a token for a workspace of the org, for unscoped workspace:write only, audited without the token', async () => {
    const r = await h.inject('POST', '/v1/workspaces/ws_mine/proxy-token', { token: org.ownerToken, body: { ttl_seconds: 60 } })
    expect(r.status).toBe(201)
    expect(r.body).toEqual({ token: expect.any(String), workspace_id: 'ws_mine', org_id: org.orgId, expires_at: expect.any(String) })
    const check = await tokens.check(`Bearer ${r.body.token}`)
    expect(check).toMatchObject({ ok: true, claims: { org_id: org.orgId, workspace_id: 'ws_mine' } })
    await h.audit.flush()
    const rows = await h.inject('GET', '/v1/audit?filter=event_type=proxy_token_minted', { token: org.ownerKey })
    expect(rows.body.events).toHaveLength(1)
    expect(rows.body.events[0]).toMatchObject({ workspace_id: 'ws_mine', user_id: org.ownerId, detail: { ttl_seconds: 60 } })
    expect(JSON.stringify(rows.body.events[0])).not.toContain(r.body.token)

    const member = await h.member(org.orgId, 'member')
    expect((await h.inject('POST', '/v1/workspaces/ws_mine/proxy-token', { token: member.token, body: {} })).body.error.code).toBe('permission_denied')
    const submit = await h.key(org.orgId, 'submit_observe')
    expect((await h.inject('POST', '/v1/workspaces/ws_mine/proxy-token', { token: submit.value, body: {} })).body.error.code).toBe('permission_denied')
    const other = await h.newOrg()
    expect((await h.inject('POST', '/v1/workspaces/ws_mine/proxy-token', { token: other.ownerKey, body: {} })).body.error.code).toBe('workspace_not_found')
    expect((await h.inject('POST', '/v1/workspaces/ws_mine/proxy-token', { token: org.ownerKey, body: { task_id: 'task_nope' } })).body.error.code).toBe('not_found')
    for (const body of [{ ttl_seconds: 0 }, { ttl_seconds: 8 * 24 * 3600 }, { bogus: 1 }]) {
      expect((await h.inject('POST', '/v1/workspaces/ws_mine/proxy-token', { token: org.ownerKey, body })).body.error.code).toBe('validation_error')
    }
  })
})
