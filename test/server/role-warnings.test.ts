// Saving a role whose caps.yaml names missing material (docs/roles.md "Warnings for missing
// credentials and secrets"): the role is saved, and the create/update answer carries one warning
// per missing credential or secret name; a personal credential of the name counts as present.
import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Sealer } from '../../src/secrets/index.js'
import { testDialects } from '../helpers/dialects.js'
import { createHarness, type Harness } from './harness.js'

const CAPS = `
- name: github
  type: http
  allow:
    - name: api
      domains: [api.github.com]
      methods: [GET]
  transforms:
    - name: gh-auth
      applies_to: [api]
      auth: { credential: github-bot, provider: github }
    - name: tenant
      applies_to: [api]
      header: { name: x-tenant, action: set, value: 'secrets["tenant_id"]' }
- name: models
  type: http
  allow:
    - name: anthropic
      domains: [api.anthropic.com]
      methods: [POST]
  transforms:
    - name: key
      applies_to: [anthropic]
      auth: { credential: anthropic-key, provider: anthropic }
    - name: same-tenant
      applies_to: [anthropic]
      header: { name: x-tenant, action: set, value: 'secrets["tenant_id"]' }
`

for (const d of testDialects()) describe(`role saves warn about missing credentials and secrets [${d.name}]`, () => {
  let h: Harness
  beforeAll(async () => {
    h = await createHarness({ open: d.open, sealer: new Sealer(randomBytes(32)) })
  })
  afterAll(() => h.close())

  it('saves the role and warns once per missing name; warnings go as the material appears', async () => {
    const { orgId, ownerToken } = await h.newOrg()
    const prov = (await h.inject('POST', '/v1/providers', { token: ownerToken, body: { name: 'claude', kind: 'anthropic', domain: 'api.anthropic.com' } })).body
    const created = await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'coder', provider_id: prov.id, capabilities: CAPS } })
    expect(created.status).toBe(201)
    expect(created.body.warnings).toEqual([
      { code: 'missing_credential', name: 'anthropic-key', capabilities: ['models'], message: expect.stringContaining('anthropic-key') },
      { code: 'missing_credential', name: 'github-bot', capabilities: ['github'], message: expect.stringContaining('github-bot') },
      { code: 'missing_secret', name: 'tenant_id', capabilities: ['github', 'models'], message: expect.stringContaining('tenant_id') },
    ])
    const read = await h.inject('GET', `/v1/agent-roles/${created.body.id}`, { token: ownerToken })
    expect(read.body.capabilities).toBe(CAPS)
    expect(read.body.warnings).toBeUndefined()

    // The org's credential, a member's personal one and the secret: nothing is missing any more.
    const member = await h.member(orgId, 'member')
    expect((await h.inject('POST', '/v1/credentials', { token: ownerToken, body: { name: 'github-bot', provider: 'github', kind: 'static_token', token: 't1' } })).status).toBe(201)
    const patched = await h.inject('PATCH', `/v1/agent-roles/${created.body.id}`, { token: ownerToken, body: { description: 'still warns' } })
    expect(patched.body.warnings.map((w: any) => w.name)).toEqual(['anthropic-key', 'tenant_id'])
    expect((await h.inject('POST', '/v1/credentials', { token: member.token, body: { name: 'anthropic-key', provider: 'anthropic', kind: 'static_token', token: 't2', personal: true } })).status).toBe(201)
    expect((await h.inject('POST', '/v1/secrets', { token: ownerToken, body: { name: 'tenant_id', value: 'acme' } })).status).toBe(201)
    const clean = await h.inject('PATCH', `/v1/agent-roles/${created.body.id}`, { token: ownerToken, body: { description: 'clean' } })
    expect(clean.status).toBe(200)
    expect(clean.body.warnings).toBeUndefined()
  })

  it('POST /v1/agent-roles/check answers the same warnings without saving; caps:write only', async () => {
    const { orgId, ownerToken } = await h.newOrg()
    const check = await h.inject('POST', '/v1/agent-roles/check', { token: ownerToken, body: { capabilities: CAPS } })
    expect(check.status).toBe(200)
    expect(check.body.warnings.map((w: any) => [w.code, w.name, w.capabilities])).toEqual([
      ['missing_credential', 'anthropic-key', ['models']], ['missing_credential', 'github-bot', ['github']], ['missing_secret', 'tenant_id', ['github', 'models']],
    ])
    expect((await h.inject('GET', '/v1/agent-roles', { token: ownerToken })).body.agent_roles).toEqual([])
    // A document that does not compile names nothing (lint reports its errors offline).
    expect((await h.inject('POST', '/v1/agent-roles/check', { token: ownerToken, body: { capabilities: '- name: 9\n' } })).body).toEqual({ warnings: [] })
    const member = await h.member(orgId, 'member')
    const denied = await h.inject('POST', '/v1/agent-roles/check', { token: member.token, body: { capabilities: CAPS } })
    expect(denied.status).toBe(403)
    expect(denied.body.error.code).toBe('permission_denied')
  })

  it('a role without transforms, or without capabilities, has no warnings', async () => {
    const { ownerToken } = await h.newOrg()
    const prov = (await h.inject('POST', '/v1/providers', { token: ownerToken, body: { name: 'claude', kind: 'anthropic', domain: 'api.anthropic.com' } })).body
    const bare = await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'bare', provider_id: prov.id } })
    expect(bare.status).toBe(201)
    expect(bare.body.warnings).toBeUndefined()
  })
})
