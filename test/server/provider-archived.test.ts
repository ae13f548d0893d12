// The spec's `provider_archived` conflict on task create and fork, reached the way a user reaches
// it — through the API only: archiving a provider archives its roles (and a role cannot be
// unarchived while its provider is), so the conflict names the provider, the cause, rather than
// the role it cascaded to. Once the provider is unarchived, the role's own archive is what is left.
// On SQLite, and on Postgres too when CORRAL_TEST_PG_URL is set.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { controllerRig, waitFor, type ControllerRig } from '../workspaces/harness.js'
import { testDialects } from '../helpers/dialects.js'
import { createHarness, type Harness } from './harness.js'

for (const dialect of testDialects()) describe(`provider_archived on task create and fork (${dialect.name})`, () => {
  let h: Harness
  let rig: ControllerRig
  let org: Awaited<ReturnType<Harness['newOrg']>>

  beforeAll(async () => {
    h = await createHarness({ open: dialect.open })
    rig = await controllerRig(h.store)
    h.deps.lifecycle = { available: true, controller: rig.controller }
    h.deps.workspaces = { get: async (o, id) => { const w = await rig.controller.get(o, id); return w && { id: w.id, created_by: w.created_by } } }
    h.deps.config.taskRateLimit = false
    org = await h.newOrg()
  })
  afterAll(async () => {
    await rig.close()
    await h.close()
  })

  const api = (method: 'GET' | 'POST', url: string, body?: unknown) => h.inject(method, url, { token: org.ownerKey, ...(body === undefined ? {} : { body }) })
  const wsState = (id: string, s: string) => waitFor(async () => (await rig.store.workspaces.byId(id))?.state === s, `workspace ${s}`)

  it('task create (by id and by name) and fork of a stopped workspace answer 409 provider_archived; after unarchiving the provider, role_archived', async () => {
    const prov = (await api('POST', '/v1/providers', { name: 'gone-model', kind: 'anthropic', domain: 'api.anthropic.com' })).body
    const role = (await api('POST', '/v1/agent-roles', { name: 'writer', provider_id: prov.id })).body

    // A workspace of the role, stopped (archive is refused while one runs).
    const task = await api('POST', '/v1/tasks', { role_name: 'writer', description: 'sleep' })
    expect(task.status).toBe(202)
    await wsState(task.body.workspace_id, 'busy')
    await api('POST', `/v1/tasks/${task.body.task_id}/cancel`)
    await wsState(task.body.workspace_id, 'idle')
    expect((await api('POST', `/v1/workspaces/${task.body.workspace_id}/stop`)).status).toBe(200)

    const archived = await api('POST', `/v1/providers/${prov.id}/archive`)
    expect(archived.body).toEqual({ status: 'archived', cascaded_roles: 1 })

    for (const ref of [{ role_id: role.id }, { role_name: 'writer' }]) {
      const r = await api('POST', '/v1/tasks', { ...ref, description: 'x' })
      expect([r.status, r.body.error?.code], JSON.stringify(ref)).toEqual([409, 'provider_archived'])
      expect(r.body.error.message).toContain('gone-model')
    }
    const fork = await api('POST', `/v1/workspaces/${task.body.workspace_id}/fork`, { fork_point_task_count: 0 })
    expect([fork.status, fork.body.error?.code]).toEqual([409, 'provider_archived'])

    // The provider back: the role's cascaded archive is what refuses now.
    expect((await api('POST', `/v1/providers/${prov.id}/unarchive`)).status).toBe(200)
    const r = await api('POST', '/v1/tasks', { role_id: role.id, description: 'x' })
    expect([r.status, r.body.error?.code]).toEqual([409, 'role_archived'])
    const fork2 = await api('POST', `/v1/workspaces/${task.body.workspace_id}/fork`, { fork_point_task_count: 0 })
    expect([fork2.status, fork2.body.error?.code]).toEqual([409, 'role_archived'])
  }, 60_000)
})
