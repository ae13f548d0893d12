// /v1/agent-roles on the real app and a real store (SQLite, and Postgres when configured): every spec field round-trips, compile
// on save (invalid_capabilities with the compiler's diagnostics), partial PATCH semantics,
// archive/unarchive, delete guard, stop-workspaces, every refusal code, every event with its detail
// keys, cross-org ids, permissions and the posture gate.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { proxyTables } from '../../src/store/proxy-tables.js'
import { testDialects } from '../helpers/dialects.js'
import { createHarness, type Harness } from './harness.js'
import { tableWorkspaceControl } from './agent-roles-fixtures.js'
import { NO_WORKSPACE_CONTROL } from '../../src/server/index.js'

const CAPS = '- name: api\n  type: http\n  allow:\n    - domains: [api.anthropic.com]\n      methods: [POST]\n'
const BAD_CAPS = '- name: 1api\n  type: http\n  allow: []\n'

for (const d of testDialects()) describe(`agent role routes [${d.name}]`, () => {
  let h: Harness
  let control: ReturnType<typeof tableWorkspaceControl>
  beforeAll(async () => {
    h = await createHarness({ open: d.open })
    control = tableWorkspaceControl(h.store)
    h.deps.workspaceControl = control
  })
  afterAll(() => h.close())

  const setup = async () => {
    const org = await h.newOrg()
    const prov = (await h.inject('POST', '/v1/providers', { token: org.ownerToken, body: { name: 'claude', kind: 'anthropic', domain: 'api.anthropic.com' } })).body
    // Roles attach only packs the org can see (src/packs/pack-rules.ts checkPackIds): real rows, no content needed.
    const packs = await Promise.all(['one', 'two', 'three'].map((name) => h.store.packs.create(org.orgId, {
      name, display_name: name, version: '1', tier: 'community', visibility: 'org', image_origin: 'upload', manifest: { name, version: '1', display_name: name },
    })))
    return { ...org, prov, packIds: packs.map((pk) => pk.id) }
  }
  const events = async (token: string, types: string) => {
    await h.audit.flush()
    const page = await h.inject('GET', `/v1/audit?filter=event_type=${types}&order=asc`, { token })
    return page.body.events as Array<{ event_type: string; user_id: string; category: string; actor: string; detail: Record<string, unknown> }>
  }

  it('creates a role with every spec field and reads it back', async () => {
    const { ownerToken, ownerId, prov, packIds } = await setup()
    const body = {
      name: 'coder', display_name: 'Coder', description: 'writes code', provider_id: prov.id, model: 'claude-opus', capabilities: CAPS,
      environment: 'staging', environment_description: 'the staging cluster', task_timeout_seconds: 900, idle_timeout_seconds: 300,
      thinking_effort: 'medium', max_continuations: 5, max_context_tokens: 200000, pool_policy: 'dynamic', pool_size: 1, pool_max_size: 3,
      pack_ids: [packIds[0], packIds[1]],
    }
    const created = await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body })
    expect(created.status).toBe(201)
    expect(created.body).toMatchObject({ ...body, created_by: ownerId })
    expect(created.body.id).toMatch(/^role_/)
    expect((await h.inject('GET', `/v1/agent-roles/${created.body.id}`, { token: ownerToken })).body).toEqual(created.body)
    expect((await h.inject('GET', '/v1/agent-roles?name=coder', { token: ownerToken })).body.agent_roles).toHaveLength(1)
    expect((await h.inject('GET', `/v1/agent-roles?provider_id=${prov.id}`, { token: ownerToken })).body.agent_roles).toHaveLength(1)

    // Defaults of a minimal role.
    const min = await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'min', provider_id: prov.id } })
    expect(min.body).toMatchObject({ environment: 'development', pool_policy: '', pack_ids: [] })
    expect(min.body.capabilities).toBeUndefined()

    const ev = await events(ownerToken, 'agent_role_created')
    expect(ev[0]).toMatchObject({ user_id: ownerId, category: 'audit', actor: 'control-plane' })
    expect(ev.map((e) => e.detail)).toEqual([
      { resource_id: created.body.id, name: 'coder', display_name: 'Coder', provider_id: prov.id, model: 'claude-opus' },
      { resource_id: min.body.id, name: 'min', display_name: '', provider_id: prov.id, model: '' },
    ])
  })

  it('refuses capabilities that do not compile, with the compiler diagnostics', async () => {
    const { ownerToken, prov } = await setup()
    const res = await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'r', provider_id: prov.id, capabilities: BAD_CAPS } })
    expect(res.status).toBe(400)
    expect(res.body.error.code).toBe('invalid_capabilities')
    const codes = res.body.error.details.diagnostics.map((d: { code: string }) => d.code)
    expect(codes).toContain('invalid_name')
    expect(res.body.error.details.diagnostics[0]).toMatchObject({ severity: 'error', line: expect.any(Number), column: expect.any(Number), path: expect.any(String) })
    expect((await h.inject('GET', '/v1/agent-roles', { token: ownerToken })).body.agent_roles).toEqual([])

    const role = (await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'r', provider_id: prov.id, capabilities: CAPS } })).body
    const patch = await h.inject('PATCH', `/v1/agent-roles/${role.id}`, { token: ownerToken, body: { capabilities: 'not: [a list' } })
    expect(patch.status).toBe(400)
    expect(patch.body.error.code).toBe('invalid_capabilities')
    expect((await h.inject('GET', `/v1/agent-roles/${role.id}`, { token: ownerToken })).body.capabilities).toBe(CAPS)
  })

  it('validates fields, enums and pool settings with details.fields', async () => {
    const { ownerToken, prov } = await setup()
    const bad = async (extra: Record<string, unknown>, field: string) => {
      const res = await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'r', provider_id: prov.id, ...extra } })
      expect(res.status, JSON.stringify(extra)).toBe(400)
      expect(res.body.error.code).toBe('validation_error')
      expect(Object.keys(res.body.error.details.fields)).toContain(field)
    }
    await bad({ name: 'has space' }, 'name')
    await bad({ environment: 'prod' }, 'environment')
    await bad({ thinking_effort: 'extreme' }, 'thinking_effort')
    await bad({ pool_policy: 'elastic' }, 'pool_policy')
    await bad({ task_timeout_seconds: -1 }, 'task_timeout_seconds')
    await bad({ idle_timeout_seconds: 1.5 }, 'idle_timeout_seconds')
    await bad({ max_continuations: '3' }, 'max_continuations')
    await bad({ pack_ids: ['a', 'a'] }, 'pack_ids')
    await bad({ pool_policy: 'dynamic' }, 'pool_max_size')
    await bad({ pool_policy: 'dynamic', pool_size: 4, pool_max_size: 2 }, 'pool_size')
    await bad({ provider_id: 'prov_nope' }, 'provider_id')
    const missing = await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'r' } })
    expect(missing.body.error.details.fields).toHaveProperty('provider_id')
  })

  it('PATCH applies only present fields, replaces pack_ids only when present, and restarts idle workspaces', async () => {
    const { ownerToken, prov, packIds } = await setup()
    const role = (await h.inject('POST', '/v1/agent-roles', {
      token: ownerToken, body: { name: 'r', provider_id: prov.id, model: 'm1', pack_ids: [packIds[0], packIds[1]], pool_policy: 'static', pool_size: 2, pool_max_size: 4 },
    })).body
    control.restarts.length = 0
    const p1 = await h.inject('PATCH', `/v1/agent-roles/${role.id}`, { token: ownerToken, body: { description: 'now described', model: null } })
    expect(p1.status).toBe(200)
    expect(p1.body).toMatchObject({ description: 'now described', pack_ids: [packIds[0], packIds[1]], pool_size: 2 })
    expect(p1.body.model).toBeUndefined()
    const p2 = await h.inject('PATCH', `/v1/agent-roles/${role.id}`, { token: ownerToken, body: { pack_ids: [packIds[2]] } })
    expect(p2.body.pack_ids).toEqual([packIds[2]])
    expect(control.restarts).toEqual([role.id, role.id])
    // A label-only change does not respawn anything.
    expect((await h.inject('PATCH', `/v1/agent-roles/${role.id}`, { token: ownerToken, body: { display_name: 'R' } })).status).toBe(200)
    expect(control.restarts).toEqual([role.id, role.id])
    // The merged record is checked: a floor above the existing ceiling is refused.
    const tooBig = await h.inject('PATCH', `/v1/agent-roles/${role.id}`, { token: ownerToken, body: { pool_size: 5 } })
    expect(tooBig.body.error.details.fields).toHaveProperty('pool_size')

    const other = (await h.inject('POST', '/v1/providers', { token: ownerToken, body: { name: 'gpt', kind: 'openai', domain: 'api.openai.com' } })).body
    await h.inject('POST', `/v1/providers/${other.id}/archive`, { token: ownerToken })
    const toArchived = await h.inject('PATCH', `/v1/agent-roles/${role.id}`, { token: ownerToken, body: { provider_id: other.id } })
    expect(toArchived.status).toBe(409)
    expect(toArchived.body.error.code).toBe('provider_archived')

    const ev = await events(ownerToken, 'agent_role_updated')
    expect(ev.map((e) => e.detail)).toEqual([
      { resource_id: role.id, name: 'r', display_name: '', provider_id: prov.id, model: '', patched_fields: ['description', 'model'] },
      { resource_id: role.id, name: 'r', display_name: '', provider_id: prov.id, model: '', patched_fields: ['pack_ids'] },
      { resource_id: role.id, name: 'r', display_name: 'R', provider_id: prov.id, model: '', patched_fields: ['display_name'] },
    ])
  })

  it('archive, unarchive and their refusals: role_archived, not_archived, provider_archived', async () => {
    const { ownerToken, prov } = await setup()
    const role = (await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'r', provider_id: prov.id } })).body
    const archived = await h.inject('POST', `/v1/agent-roles/${role.id}/archive`, { token: ownerToken })
    expect(archived.status).toBe(200)
    expect(archived.body).toEqual({ status: 'archived' })
    expect((await h.inject('GET', '/v1/agent-roles', { token: ownerToken })).body.agent_roles).toEqual([])
    expect((await h.inject('GET', '/v1/agent-roles?include_archived=true', { token: ownerToken })).body.agent_roles).toHaveLength(1)
    expect((await h.inject('GET', '/v1/agent-roles?name=r', { token: ownerToken })).body.agent_roles).toEqual([])
    expect((await h.inject('GET', '/v1/agent-roles?name=r&include_archived=true', { token: ownerToken })).body.agent_roles).toHaveLength(1)
    expect((await h.inject('POST', `/v1/agent-roles/${role.id}/archive`, { token: ownerToken })).body).toEqual({ status: 'archived' })

    const patch = await h.inject('PATCH', `/v1/agent-roles/${role.id}`, { token: ownerToken, body: { description: 'x' } })
    expect(patch.status).toBe(409)
    expect(patch.body.error.code).toBe('role_archived')

    await h.inject('POST', `/v1/providers/${prov.id}/archive`, { token: ownerToken })
    const blocked = await h.inject('POST', `/v1/agent-roles/${role.id}/unarchive`, { token: ownerToken })
    expect(blocked.status).toBe(409)
    expect(blocked.body.error.code).toBe('provider_archived')
    await h.inject('POST', `/v1/providers/${prov.id}/unarchive`, { token: ownerToken })
    const un = await h.inject('POST', `/v1/agent-roles/${role.id}/unarchive`, { token: ownerToken })
    expect(un.status).toBe(200)
    expect(un.body).toEqual({ status: 'unarchived' })
    const again = await h.inject('POST', `/v1/agent-roles/${role.id}/unarchive`, { token: ownerToken })
    expect(again.status).toBe(409)
    expect(again.body.error.code).toBe('not_archived')

    const ev = await events(ownerToken, 'agent_role_archived,agent_role_unarchived')
    expect(ev.map((e) => [e.event_type, e.detail])).toEqual([
      ['agent_role_archived', { resource_id: role.id, name: 'r' }],
      ['agent_role_unarchived', { resource_id: role.id, name: 'r' }],
    ])
  })

  it('delete is refused while workspaces reference the role (role_in_use); duplicate names conflict', async () => {
    const { ownerToken, orgId, prov } = await setup()
    const role = (await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'r', provider_id: prov.id } })).body
    const dup = await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'r', provider_id: prov.id } })
    expect(dup.status).toBe(409)
    expect(dup.body.error.code).toBe('conflict')
    const other = (await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'other', provider_id: prov.id } })).body
    const rename = await h.inject('PATCH', `/v1/agent-roles/${other.id}`, { token: ownerToken, body: { name: 'r' } })
    expect(rename.body.error.code).toBe('conflict')

    const ws = await proxyTables(h.store.db).workspaces.create(orgId, { role_id: role.id, created_by_user_id: 'u', state: 'stopped' })
    expect(ws).toMatch(/^ws_/)
    const refused = await h.inject('DELETE', `/v1/agent-roles/${role.id}`, { token: ownerToken })
    expect(refused.status).toBe(409)
    expect(refused.body.error).toMatchObject({ code: 'role_in_use', details: { workspaces: 1 } })

    const deleted = await h.inject('DELETE', `/v1/agent-roles/${other.id}`, { token: ownerToken })
    expect(deleted.status).toBe(200)
    expect(deleted.body).toEqual({ status: 'deleted' })
    expect((await h.inject('GET', `/v1/agent-roles/${other.id}`, { token: ownerToken })).status).toBe(404)
    expect((await events(ownerToken, 'agent_role_deleted')).map((e) => e.detail)).toEqual([{ resource_id: other.id, name: 'other' }])
  })

  it('stop-workspaces stops the role\'s running workspaces, counts them, and is idempotent', async () => {
    const { ownerToken, orgId, prov } = await setup()
    const role = (await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'r', provider_id: prov.id } })).body
    const pt = proxyTables(h.store.db)
    for (const state of ['idle', 'busy', 'stopped']) await pt.workspaces.create(orgId, { role_id: role.id, created_by_user_id: 'u', state })
    const first = await h.inject('POST', `/v1/agent-roles/${role.id}/stop-workspaces`, { token: ownerToken })
    expect(first.status).toBe(200)
    expect(first.body).toEqual({ stopping: 2 })
    expect((await h.inject('POST', `/v1/agent-roles/${role.id}/stop-workspaces`, { token: ownerToken })).body).toEqual({ stopping: 0 })
    expect((await h.inject('POST', '/v1/agent-roles/role_nope/stop-workspaces', { token: ownerToken })).status).toBe(404)

    // Unscoped workspace:write only: a member (workspace:write:own) and a submit_observe key are refused.
    const member = await h.member(orgId, 'member')
    const submit = await h.key(orgId, 'submit_observe')
    for (const token of [member.token, submit.value]) {
      expect((await h.inject('POST', `/v1/agent-roles/${role.id}/stop-workspaces`, { token })).body.error.code).toBe('permission_denied')
    }
  })

  it('hides other orgs\' roles, gates writes on caps:write and posture, and refuses another org\'s provider', async () => {
    const a = await setup()
    const b = await setup()
    const role = (await h.inject('POST', '/v1/agent-roles', { token: a.ownerToken, body: { name: 'r', provider_id: a.prov.id } })).body
    for (const [method, url] of [
      ['GET', `/v1/agent-roles/${role.id}`], ['PATCH', `/v1/agent-roles/${role.id}`], ['DELETE', `/v1/agent-roles/${role.id}`],
      ['POST', `/v1/agent-roles/${role.id}/archive`], ['POST', `/v1/agent-roles/${role.id}/unarchive`], ['POST', `/v1/agent-roles/${role.id}/stop-workspaces`],
    ] as const) {
      const res = await h.inject(method, url, { token: b.ownerToken, ...(method === 'PATCH' ? { body: { description: 'x' } } : {}) })
      expect(res.status, `${method} ${url}`).toBe(404)
    }
    const foreign = await h.inject('POST', '/v1/agent-roles', { token: b.ownerToken, body: { name: 'x', provider_id: a.prov.id } })
    expect(foreign.body.error.details.fields).toHaveProperty('provider_id')

    const member = await h.member(a.orgId, 'member')
    expect((await h.inject('GET', `/v1/agent-roles/${role.id}`, { token: member.token })).status).toBe(200)
    expect((await h.inject('PATCH', `/v1/agent-roles/${role.id}`, { token: member.token, body: { description: 'x' } })).body.error.code).toBe('permission_denied')
    await h.store.orgs.setPosture(a.orgId, 'decommissioning')
    const gated = await h.inject('POST', '/v1/agent-roles', { token: a.ownerToken, body: { name: 'y', provider_id: a.prov.id } })
    expect(gated.body.error.code).toBe('tenant_inactive')
    expect((await h.inject('POST', `/v1/agent-roles/${role.id}/archive`, { token: a.ownerToken })).body.error.code).toBe('tenant_inactive')
  })

  it('no interleaving of role create and provider archive leaves an active role on an archived provider', async () => {
    const { ownerToken, prov } = await setup()
    const [created, archived] = await Promise.all([
      Promise.all(['a', 'b', 'c', 'd'].map((name) => h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name, provider_id: prov.id } }))),
      h.inject('POST', `/v1/providers/${prov.id}/archive`, { token: ownerToken }),
    ])
    expect(archived.status).toBe(200)
    for (const res of created) expect([201, 409]).toContain(res.status)
    const made = created.filter((r) => r.status === 201).length
    expect(archived.body.cascaded_roles).toBe(made) // every role that got in was archived with the provider
    expect((await h.inject('GET', '/v1/agent-roles', { token: ownerToken })).body.agent_roles).toEqual([])
  })

  it('without a workspace controller, roles behave as if no workspaces exist', async () => {
    const { ownerToken, prov } = await setup()
    const role = (await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'r', provider_id: prov.id } })).body
    h.deps.workspaceControl = NO_WORKSPACE_CONTROL
    try {
      expect((await h.inject('POST', `/v1/agent-roles/${role.id}/stop-workspaces`, { token: ownerToken })).body).toEqual({ stopping: 0 })
      expect((await h.inject('PATCH', `/v1/agent-roles/${role.id}`, { token: ownerToken, body: { description: 'd' } })).status).toBe(200)
      expect((await h.inject('POST', `/v1/providers/${prov.id}/archive`, { token: ownerToken })).body).toEqual({ status: 'archived', cascaded_roles: 1 })
    } finally {
      h.deps.workspaceControl = control
    }
  })
})
