// A role's `resources` (docs/roles.md "Resources", a documented addition to the spec's Agent role)
// on the real app and store (SQLite, and Postgres when configured): requests and limits of cpu,
// memory and ephemeral-storage round-trip as Kubernetes quantities, anything else is a field
// error, a request above its own limit is refused, PATCH replaces or clears them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../helpers/dialects.js'
import { createHarness, type Harness } from './harness.js'

for (const d of testDialects()) describe(`agent role resources [${d.name}]`, () => {
  let h: Harness
  beforeAll(async () => {
    h = await createHarness({ open: d.open })
  })
  afterAll(() => h.close())

  const setup = async () => {
    const org = await h.newOrg()
    const prov = (await h.inject('POST', '/v1/providers', { token: org.ownerToken, body: { name: 'claude', kind: 'anthropic', domain: 'api.anthropic.com' } })).body
    return { ...org, prov }
  }

  it('round-trips requests and limits; PATCH replaces them, null clears them; a role without them has none', async () => {
    const { ownerToken, prov } = await setup()
    const resources = { requests: { cpu: '250m', memory: '512Mi' }, limits: { cpu: '2', memory: '2Gi', 'ephemeral-storage': '4Gi' } }
    const created = await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'big', provider_id: prov.id, resources } })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    expect(created.body.resources).toEqual(resources)
    expect((await h.inject('GET', `/v1/agent-roles/${created.body.id}`, { token: ownerToken })).body.resources).toEqual(resources)
    const smaller = { limits: { memory: '1Gi' } }
    const patched = await h.inject('PATCH', `/v1/agent-roles/${created.body.id}`, { token: ownerToken, body: { resources: smaller } })
    expect(patched.status).toBe(200)
    expect(patched.body.resources).toEqual(smaller)
    const role = await h.store.workspaces.role(created.body.org_id, { id: created.body.id })
    expect(role?.resources).toEqual(smaller)
    const cleared = await h.inject('PATCH', `/v1/agent-roles/${created.body.id}`, { token: ownerToken, body: { resources: null } })
    expect(cleared.body.resources).toBeUndefined()
    const plain = await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'plain', provider_id: prov.id } })
    expect(plain.body.resources).toBeUndefined()
  })

  it('refuses what is no quantity, an unknown resource, and a request above its limit, each as a field error', async () => {
    const { ownerToken, prov } = await setup()
    const bad = async (resources: unknown, field: RegExp) => {
      const res = await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'r', provider_id: prov.id, resources } })
      expect(res.status, JSON.stringify(resources)).toBe(400)
      expect(res.body.error.code).toBe('validation_error')
      expect(Object.keys(res.body.error.details.fields).join(' '), JSON.stringify(res.body.error)).toMatch(field)
    }
    await bad({ requests: { cpu: 'lots' } }, /resources/)
    await bad({ limits: { memory: '-1Gi' } }, /resources/)
    await bad({ limits: { gpu: '1' } }, /resources/)
    await bad({ requets: {} }, /resources/)
    await bad({ requests: { memory: '4Gi' }, limits: { memory: '1Gi' } }, /resources\.requests\.memory/)
    await bad({ requests: { cpu: '1500m' }, limits: { cpu: '1' } }, /resources\.requests\.cpu/)
    const ok = await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'ok', provider_id: prov.id, resources: { requests: { cpu: '1000m' }, limits: { cpu: '1' } } } })
    expect(ok.status).toBe(201)
  })
})
