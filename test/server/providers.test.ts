// /v1/providers on the real app and a real store (SQLite, and Postgres when configured): create/list/show/patch/delete, archive
// with its cascade and the workspaces_active guard, unarchive, every refusal code, every event with
// its detail keys, cross-org ids, permissions and the posture gate.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { proxyTables } from '../../src/store/proxy-tables.js'
import { testDialects } from '../helpers/dialects.js'
import { createHarness, type Harness } from './harness.js'
import { tableWorkspaceControl } from './agent-roles-fixtures.js'

const CAPS = '- name: api\n  type: http\n  allow:\n    - domains: [api.anthropic.com]\n      methods: [POST]\n'

for (const d of testDialects()) describe(`provider routes [${d.name}]`, () => {
  let h: Harness
  beforeAll(async () => {
    h = await createHarness({ open: d.open })
    h.deps.workspaceControl = tableWorkspaceControl(h.store)
  })
  afterAll(() => h.close())

  const events = async (token: string, types: string) => {
    await h.audit.flush()
    const page = await h.inject('GET', `/v1/audit?filter=event_type=${types}&order=asc`, { token })
    expect(page.status).toBe(200)
    return page.body.events as Array<{ event_type: string; user_id: string; category: string; actor: string; detail: Record<string, unknown> }>
  }

  it('creates, lists, shows and patches a provider, deriving the domain from base_url', async () => {
    const { ownerToken, ownerId } = await h.newOrg()
    const created = await h.inject('POST', '/v1/providers', {
      token: ownerToken,
      body: { name: 'claude', display_name: 'Anthropic', kind: 'anthropic', base_url: 'https://API.Anthropic.com/', default_model: 'claude-sonnet' },
    })
    expect(created.status).toBe(201)
    expect(created.body).toMatchObject({ name: 'claude', kind: 'anthropic', domain: 'api.anthropic.com', base_url: 'https://api.anthropic.com', default_model: 'claude-sonnet', created_by: ownerId })
    expect(created.body.id).toMatch(/^prov_/)
    expect(created.body.archived_at).toBeUndefined()

    const list = await h.inject('GET', '/v1/providers', { token: ownerToken })
    expect(list.body.providers.map((p: { id: string }) => p.id)).toEqual([created.body.id])
    const byName = await h.inject('GET', '/v1/providers?name=claude', { token: ownerToken })
    expect(byName.body.providers).toHaveLength(1)
    expect((await h.inject('GET', `/v1/providers/${created.body.id}`, { token: ownerToken })).body).toEqual(created.body)

    const patched = await h.inject('PATCH', `/v1/providers/${created.body.id}`, { token: ownerToken, body: { default_model: 'claude-opus', display_name: null } })
    expect(patched.status).toBe(200)
    expect(patched.body).toMatchObject({ default_model: 'claude-opus', domain: 'api.anthropic.com' })
    expect(patched.body.display_name).toBeUndefined()
    // A new base URL moves the domain with it.
    const moved = await h.inject('PATCH', `/v1/providers/${created.body.id}`, { token: ownerToken, body: { base_url: 'https://gateway.example.com/anthropic' } })
    expect(moved.body).toMatchObject({ domain: 'gateway.example.com', base_url: 'https://gateway.example.com/anthropic' })

    const ev = await events(ownerToken, 'provider_created,provider_updated')
    expect(ev.map((e) => e.event_type)).toEqual(['provider_created', 'provider_updated', 'provider_updated'])
    expect(ev[0]).toMatchObject({ user_id: ownerId, category: 'audit', actor: 'control-plane' })
    expect(ev[0].detail).toEqual({ resource_id: created.body.id, name: 'claude', display_name: 'Anthropic', kind: 'anthropic', domain: 'api.anthropic.com' })
    expect(ev[1].detail).toEqual({ resource_id: created.body.id, name: 'claude', display_name: '', kind: 'anthropic', domain: 'api.anthropic.com', patched_fields: ['default_model', 'display_name'] })
    expect(ev[2].detail).toMatchObject({ domain: 'gateway.example.com', patched_fields: ['base_url'] })
  })

  it('validates every field with details.fields', async () => {
    const { ownerToken } = await h.newOrg()
    const bad = async (body: unknown, field: string) => {
      const res = await h.inject('POST', '/v1/providers', { token: ownerToken, body })
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(res.body.error.code).toBe('validation_error')
      expect(Object.keys(res.body.error.details.fields)).toContain(field)
    }
    await bad({ name: '1abc', kind: 'anthropic', domain: 'a.com' }, 'name')
    await bad({ name: 'a', kind: 'palm', domain: 'a.com' }, 'kind')
    await bad({ name: 'a', kind: 'openai' }, 'domain')
    await bad({ name: 'a', kind: 'openai', domain: 'https://a.com' }, 'domain')
    await bad({ name: 'a', kind: 'openai', base_url: 'http://a.com' }, 'base_url')
    await bad({ name: 'a', kind: 'openai', base_url: 'not a url' }, 'base_url')
    await bad({ name: 'a', kind: 'openai', base_url: 'https://u:p@a.com' }, 'base_url')
    await bad({ name: 'a', kind: 'openai', domain: 'b.com', base_url: 'https://a.com' }, 'base_url')
    await bad({ name: 'a', kind: 'openai', domain: 'a.com', extra: 1 }, 'extra')
    const empty = await h.inject('PATCH', '/v1/providers/prov_x', { token: ownerToken, body: {} })
    expect(empty.body.error.code).toBe('validation_error')
  })

  it('refuses a duplicate name with conflict, and hides other orgs\' providers', async () => {
    const a = await h.newOrg()
    const b = await h.newOrg()
    const body = { name: 'openai', kind: 'openai', domain: 'api.openai.com' }
    const created = await h.inject('POST', '/v1/providers', { token: a.ownerToken, body })
    expect(created.status).toBe(201)
    const dup = await h.inject('POST', '/v1/providers', { token: a.ownerToken, body })
    expect(dup.status).toBe(409)
    expect(dup.body.error.code).toBe('conflict')
    expect((await h.inject('POST', '/v1/providers', { token: b.ownerToken, body })).status).toBe(201) // names are per org

    const id = created.body.id
    for (const [method, url] of [
      ['GET', `/v1/providers/${id}`], ['PATCH', `/v1/providers/${id}`], ['DELETE', `/v1/providers/${id}`],
      ['POST', `/v1/providers/${id}/archive`], ['POST', `/v1/providers/${id}/unarchive`],
    ] as const) {
      const res = await h.inject(method, url, { token: b.ownerToken, ...(method === 'PATCH' ? { body: { default_model: 'x' } } : {}) })
      expect(res.status, `${method} ${url}`).toBe(404)
      expect(res.body.error.code).toBe('not_found')
    }
    expect((await h.inject('GET', '/v1/providers', { token: b.ownerToken })).body.providers.map((p: { id: string }) => p.id)).not.toContain(id)
  })

  it('archive cascades to roles, is refused while workspaces run, and unarchive leaves roles archived', async () => {
    const { ownerToken, orgId } = await h.newOrg()
    const prov = (await h.inject('POST', '/v1/providers', { token: ownerToken, body: { name: 'claude', kind: 'anthropic', domain: 'api.anthropic.com' } })).body
    const other = (await h.inject('POST', '/v1/providers', { token: ownerToken, body: { name: 'other', kind: 'openai', domain: 'api.openai.com' } })).body
    const roles = []
    for (const name of ['r1', 'r2']) {
      roles.push((await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name, provider_id: prov.id, capabilities: CAPS } })).body)
    }
    const bystander = (await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'r3', provider_id: other.id } })).body

    const pt = proxyTables(h.store.db)
    const ws = await pt.workspaces.create(orgId, { role_id: roles[1].id, created_by_user_id: 'u', state: 'busy' })
    const refused = await h.inject('POST', `/v1/providers/${prov.id}/archive`, { token: ownerToken })
    expect(refused.status).toBe(409)
    expect(refused.body.error).toMatchObject({ code: 'workspaces_active', details: { active_workspaces: 1 } })

    await pt.workspaces.setState(orgId, ws, 'stopped')
    const archived = await h.inject('POST', `/v1/providers/${prov.id}/archive`, { token: ownerToken })
    expect(archived.status).toBe(200)
    expect(archived.body).toEqual({ status: 'archived', cascaded_roles: 2 })
    expect((await h.inject('GET', '/v1/providers', { token: ownerToken })).body.providers.map((p: { name: string }) => p.name)).toEqual(['other'])
    expect((await h.inject('GET', '/v1/providers?include_archived=true', { token: ownerToken })).body.providers).toHaveLength(2)
    expect((await h.inject('GET', '/v1/agent-roles', { token: ownerToken })).body.agent_roles.map((r: { id: string }) => r.id)).toEqual([bystander.id])
    // Repeating is a no-op: nothing more to cascade, no second event.
    expect((await h.inject('POST', `/v1/providers/${prov.id}/archive`, { token: ownerToken })).body).toEqual({ status: 'archived', cascaded_roles: 0 })

    // Archived providers refuse edits and new roles.
    expect((await h.inject('PATCH', `/v1/providers/${prov.id}`, { token: ownerToken, body: { default_model: 'm' } })).body.error.code).toBe('provider_archived')
    const newRole = await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'r4', provider_id: prov.id } })
    expect(newRole.status).toBe(409)
    expect(newRole.body.error.code).toBe('provider_archived')

    const un = await h.inject('POST', `/v1/providers/${prov.id}/unarchive`, { token: ownerToken })
    expect(un.status).toBe(200)
    expect(un.body).toEqual({ status: 'unarchived' })
    const again = await h.inject('POST', `/v1/providers/${prov.id}/unarchive`, { token: ownerToken })
    expect(again.status).toBe(409)
    expect(again.body.error.code).toBe('not_archived')
    const roleNow = (await h.inject('GET', `/v1/agent-roles/${roles[0].id}`, { token: ownerToken })).body
    expect(roleNow.archived_at).toBeDefined()

    const ev = await events(ownerToken, 'provider_archived,provider_unarchived')
    expect(ev.map((e) => [e.event_type, e.detail])).toEqual([
      ['provider_archived', { resource_id: prov.id, name: 'claude', cascaded_roles: 2 }],
      ['provider_unarchived', { resource_id: prov.id, name: 'claude' }],
    ])
  })

  it('delete is refused while roles reference the provider (provider_in_use) and emits provider_deleted', async () => {
    const { ownerToken } = await h.newOrg()
    const prov = (await h.inject('POST', '/v1/providers', { token: ownerToken, body: { name: 'p', kind: 'openai', domain: 'llm.example.com' } })).body
    const role = (await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'r', provider_id: prov.id } })).body
    await h.inject('POST', `/v1/agent-roles/${role.id}/archive`, { token: ownerToken })
    const refused = await h.inject('DELETE', `/v1/providers/${prov.id}`, { token: ownerToken })
    expect(refused.status).toBe(409)
    expect(refused.body.error).toMatchObject({ code: 'provider_in_use', details: { roles: 1 } })
    expect((await h.inject('DELETE', `/v1/agent-roles/${role.id}`, { token: ownerToken })).status).toBe(200)
    const deleted = await h.inject('DELETE', `/v1/providers/${prov.id}`, { token: ownerToken })
    expect(deleted.status).toBe(200)
    expect(deleted.body).toEqual({ status: 'deleted' })
    expect((await h.inject('GET', `/v1/providers/${prov.id}`, { token: ownerToken })).status).toBe(404)
    const ev = await events(ownerToken, 'provider_deleted')
    expect(ev.map((e) => e.detail)).toEqual([{ resource_id: prov.id, name: 'p' }])
  })

  it('writes need caps:write, reads any member; writes are refused in an inactive posture', async () => {
    const { orgId, ownerToken } = await h.newOrg()
    const member = await h.member(orgId, 'member')
    const readOnly = await h.key(orgId, 'read_only')
    const prov = (await h.inject('POST', '/v1/providers', { token: ownerToken, body: { name: 'p', kind: 'openai', domain: 'llm.example.com' } })).body
    for (const token of [member.token, readOnly.value]) {
      const denied = await h.inject('POST', '/v1/providers', { token, body: { name: 'q', kind: 'openai', domain: 'llm.example.com' } })
      expect(denied.status).toBe(403)
      expect(denied.body.error.code).toBe('permission_denied')
      expect((await h.inject('POST', `/v1/providers/${prov.id}/archive`, { token })).status).toBe(403)
      expect((await h.inject('GET', '/v1/providers', { token })).status).toBe(200)
      expect((await h.inject('GET', `/v1/providers/${prov.id}`, { token })).status).toBe(200)
    }
    await h.store.orgs.setPosture(orgId, 'past_due')
    const gated = await h.inject('POST', '/v1/providers', { token: ownerToken, body: { name: 'q', kind: 'openai', domain: 'llm.example.com' } })
    expect(gated.status).toBe(403)
    expect(gated.body.error.code).toBe('tenant_inactive')
    expect((await h.inject('GET', '/v1/providers', { token: ownerToken })).status).toBe(200)
  })
})
