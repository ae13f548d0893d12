// /v1 tasks and workspaces routes over the real app, a real SQLite store and the workspace
// controller with the `process` runtime and the stand-in agent: every refusal code of the spec's
// task/workspace endpoints, multipart uploads, ownership (`:own`), cross-org, posture, rate limit.
// On SQLite, and on Postgres too when CORRAL_TEST_PG_URL is set.
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { proxyTables } from '../../src/store/proxy-tables.js'
import { controllerRig, waitFor, type ControllerRig } from '../workspaces/harness.js'
import { testDialects } from '../helpers/dialects.js'
import { createHarness, type Harness } from './harness.js'

for (const dialect of testDialects()) describe(`tasks and workspaces routes (${dialect.name})`, () => {
  let h: Harness
  let rig: ControllerRig
  let org: Awaited<ReturnType<Harness['newOrg']>>
  let roleId: string

  beforeAll(async () => {
    h = await createHarness({ open: dialect.open })
    rig = await controllerRig(h.store)
    h.deps.lifecycle = { available: true, controller: rig.controller }
    h.deps.workspaces = { get: async (o, id) => { const w = await rig.controller.get(o, id); return w && { id: w.id, created_by: w.created_by } } }
    h.deps.config.taskRateLimit = false
    org = await h.newOrg()
    roleId = await newRole(org.orgId, 'coder')
  })
  afterAll(async () => {
    await rig.close()
    await h.close()
  })

  const t = () => proxyTables(h.store.db).workspaces
  async function newRole(orgId: string, name: string, capabilities: string | null = null): Promise<string> {
    const prov = await t().createProvider(orgId, { name: `prov-${name}` })
    return t().createRole(orgId, { name, provider_id: prov, capabilities })
  }
  const submit = (body: unknown, token = org.ownerKey) => h.inject('POST', '/v1/tasks', { token, body })
  const wsState = (id: string, s: string) => waitFor(async () => (await rig.store.workspaces.byId(id))?.state === s, `workspace ${s}`)

  it('POST /v1/tasks: 202 with the task accepted response; GET task and workspace; list filters', async () => {
    const res = await submit({ role_name: 'coder', description: 'sleep' })
    expect(res.status).toBe(202)
    expect(res.body).toEqual({ task_id: expect.stringMatching(/^task_/), workspace_id: expect.stringMatching(/^ws_/), status: 'submitted' })
    const task = await h.inject('GET', `/v1/tasks/${res.body.task_id}`, { token: org.ownerKey })
    expect(task.body).toMatchObject({ id: res.body.task_id, workspace_id: res.body.workspace_id, description: 'sleep' })
    await wsState(res.body.workspace_id, 'busy')
    const ws = await h.inject('GET', `/v1/workspaces/${res.body.workspace_id}`, { token: org.ownerKey })
    expect(ws.body).toMatchObject({ id: res.body.workspace_id, state: 'busy', role_name: 'coder', role_id: roleId, task_count: 0 })
    expect(ws.body.created_by_user_id).toBeUndefined()
    const busy = await h.inject('GET', '/v1/workspaces?state=busy&role=coder', { token: org.ownerKey })
    expect(busy.body.workspaces.map((w: { id: string }) => w.id)).toContain(res.body.workspace_id)
    expect((await h.inject('GET', '/v1/workspaces?state=stopped', { token: org.ownerKey })).body.workspaces.map((w: { id: string }) => w.id)).not.toContain(res.body.workspace_id)
    expect((await h.inject('GET', '/v1/workspaces?state=bogus', { token: org.ownerKey })).body.error.code).toBe('validation_error')

    // follow-up while busy, cancel, stop twice
    const again = await h.inject('POST', `/v1/workspaces/${res.body.workspace_id}/tasks`, { token: org.ownerKey, body: { description: 'x' } })
    expect(again.status).toBe(409)
    expect(again.body.error.code).toBe('task_already_running')
    const fork = await h.inject('POST', `/v1/workspaces/${res.body.workspace_id}/fork`, { token: org.ownerKey, body: { fork_point_task_count: 0 } })
    expect(fork.body.error.code).toBe('invalid_state')
    await waitFor(async () => existsSync(join(rig.root, 'runtime', 'workspaces', res.body.workspace_id, 'data', 'tasks.log')), 'the agent started')
    const cancel = await h.inject('POST', `/v1/tasks/${res.body.task_id}/cancel`, { token: org.ownerKey })
    expect(cancel.body).toMatchObject({ status: 'cancelled', reason: 'cancelled_by_user' })
    await wsState(res.body.workspace_id, 'idle')
    const stop = await h.inject('POST', `/v1/workspaces/${res.body.workspace_id}/stop`, { token: org.ownerKey })
    expect(stop.status).toBe(200)
    expect(stop.body).toMatchObject({ status: 'stopped', workspace: { state: 'stopped', has_snapshot: true } })
    const twice = await h.inject('POST', `/v1/workspaces/${res.body.workspace_id}/stop`, { token: org.ownerKey })
    expect(twice.status).toBe(409)
    expect(twice.body.error.code).toBe('workspace_already_stopped')
    const files = await h.inject('GET', `/v1/workspaces/${res.body.workspace_id}/snapshot/files`, { token: org.ownerKey })
    expect(files.body.entries).toEqual(expect.arrayContaining([expect.objectContaining({ path: 'tasks.log', is_dir: false, readonly: false })]))
    const tasks = await h.inject('GET', `/v1/workspaces/${res.body.workspace_id}/tasks`, { token: org.ownerKey })
    expect(tasks.body.tasks.map((x: { status: string }) => x.status)).toEqual(['cancelled'])

    // fork of a stopped parent: 202, provisioning, owned by the forker
    const forked = await h.inject('POST', `/v1/workspaces/${res.body.workspace_id}/fork`, { token: org.ownerKey, body: { fork_point_task_count: 1 } })
    expect(forked.status).toBe(202)
    expect(forked.body).toMatchObject({ status: 'provisioning', workspace_id: expect.stringMatching(/^ws_/), parent_workspace_id: res.body.workspace_id })
  })

  it('multipart: files land in /data/uploads/<task_id>/ before the agent starts', async () => {
    const form = new FormData()
    form.append('role_id', roleId)
    form.append('description', 'sleep')
    form.append('max_continuations', '2')
    form.append('file', new Blob(['alpha']), 'notes.txt')
    form.append('file', new Blob(['beta']), 'data.csv')
    form.append('file', new Blob([Buffer.alloc(3 * 1024 * 1024, 7)]), 'big.bin') // over the 1 MiB JSON body limit
    const req = new Request('http://x/', { method: 'POST', body: form })
    const res = await h.app.inject({
      method: 'POST', url: '/v1/tasks', payload: Buffer.from(await req.arrayBuffer()),
      headers: { authorization: `Bearer ${org.ownerKey}`, 'content-type': req.headers.get('content-type')! },
    })
    expect(res.statusCode).toBe(202)
    const { task_id, workspace_id } = res.json()
    await wsState(workspace_id, 'busy')
    const dir = join(rig.root, 'runtime', 'workspaces', workspace_id, 'data', 'uploads', task_id)
    expect(readFileSync(join(dir, 'notes.txt'), 'utf8')).toBe('alpha')
    expect(readFileSync(join(dir, 'data.csv'), 'utf8')).toBe('beta')
    expect(readFileSync(join(dir, 'big.bin')).length).toBe(3 * 1024 * 1024)
    const task = (await h.inject('GET', `/v1/tasks/${task_id}`, { token: org.ownerKey })).body
    expect(task).toMatchObject({ uploads: ['notes.txt', 'data.csv', 'big.bin'], options: { max_continuations: 2 } })
    expect(existsSync(rig.controller.stagingDir(task_id))).toBe(false)
    await rig.controller.stop(org.orgId, workspace_id)
  })

  it('validation and role refusals: validation_error, not_found, role_archived, provider_archived, invalid_capabilities', async () => {
    expect((await submit({ role_name: 'coder' })).body.error).toMatchObject({ code: 'validation_error', details: { fields: { description: expect.any(String) } } })
    expect((await submit({ description: 'x' })).body.error.code).toBe('validation_error')
    expect((await submit({ role_name: 'coder', description: 'x', bogus: 1 })).body.error.code).toBe('validation_error')
    expect((await submit({ role_name: 'coder', description: 'x', thinking_effort: 'max' })).body.error.code).toBe('validation_error')
    const missing = await submit({ role_name: 'nobody', description: 'x' })
    expect(missing.status).toBe(404)

    const archivedRole = await newRole(org.orgId, 'old-role')
    await h.store.db.updateTable('agent_roles' as never).set({ archived_at: new Date().toISOString() } as never).where('id' as never, '=', archivedRole as never).execute()
    const r1 = await submit({ role_id: archivedRole, description: 'x' })
    expect([r1.status, r1.body.error.code]).toEqual([409, 'role_archived'])

    const provRole = await newRole(org.orgId, 'prov-gone')
    await h.store.db.updateTable('providers' as never).set({ archived_at: new Date().toISOString() } as never).where('name' as never, '=', 'prov-prov-gone' as never).execute()
    const r2 = await submit({ role_name: 'prov-gone', description: 'x' })
    expect([r2.status, r2.body.error.code]).toEqual([409, 'provider_archived'])
    expect(provRole).toBeTruthy()

    await newRole(org.orgId, 'broken', 'version: 1\ncapabilities: [[[')
    const r3 = await submit({ role_name: 'broken', description: 'x' })
    expect(r3.body.error.code).toBe('invalid_capabilities')
    expect(r3.body.error.details.issues.length).toBeGreaterThan(0)
    // role_id wins over role_name
    const both = await submit({ role_id: roleId, role_name: 'broken', description: 'crash' })
    expect(both.status).toBe(202)
  })

  it('follow-ups: workspace_not_ready while provisioning, workspace_archived, restart after stop; unarchive', async () => {
    const pending = await rig.store.workspaces.create(org.orgId, { role_id: roleId, created_by: 'x', created_by_user_id: 'x' })
    const r1 = await h.inject('POST', `/v1/workspaces/${pending}/tasks`, { token: org.ownerKey, body: { description: 'x' } })
    expect([r1.status, r1.body.error.code]).toEqual([409, 'workspace_not_ready'])

    const created = await h.inject('POST', '/v1/workspaces', { token: org.ownerKey, body: { role_name: 'coder' } })
    expect(created.status).toBe(201)
    const id = created.body.id
    await wsState(id, 'idle')
    const archived = await h.inject('POST', `/v1/workspaces/${id}/archive`, { token: org.ownerKey })
    expect(archived.body).toMatchObject({ status: 'archived', workspace: { state: 'archived' } })
    const r2 = await h.inject('POST', `/v1/workspaces/${id}/tasks`, { token: org.ownerKey, body: { description: 'x' } })
    expect([r2.status, r2.body.error.code]).toEqual([409, 'workspace_archived'])
    const un = await h.inject('POST', `/v1/workspaces/${id}/unarchive`, { token: org.ownerKey })
    expect(un.body).toMatchObject({ status: 'unarchived', workspace: { state: 'stopped' } })
    const r3 = await h.inject('POST', `/v1/workspaces/${id}/tasks`, { token: org.ownerKey, body: { description: 'crash', reset_session: true, metadata: { ticket: 7 } } })
    expect(r3.status).toBe(202)
    const done = await waitFor(async () => { const x = await rig.store.workspaces.tasks.byId(r3.body.task_id); return x?.status === 'failed' && x }, 'follow-up ran')
    expect(done).toMatchObject({ options: { reset_session: true }, metadata: { ticket: 7 } })
  })

  it('ownership: :own callers see and act on their own workspaces only; read_only keys cannot submit; other orgs get not found', async () => {
    const member = await h.member(org.orgId, 'member')
    const mine = await submit({ role_name: 'coder', description: 'crash' }, member.token)
    expect(mine.status).toBe(202)
    const theirs = await submit({ role_name: 'coder', description: 'crash' })
    const denied = await h.inject('GET', `/v1/workspaces/${theirs.body.workspace_id}`, { token: member.token })
    expect([denied.status, denied.body.error.code]).toEqual([403, 'permission_denied'])
    expect((await h.inject('GET', `/v1/tasks/${theirs.body.task_id}`, { token: member.token })).body.error.code).toBe('permission_denied')
    expect((await h.inject('POST', `/v1/workspaces/${theirs.body.workspace_id}/stop`, { token: member.token })).body.error.code).toBe('permission_denied')
    const listed = await h.inject('GET', '/v1/workspaces', { token: member.token })
    expect(listed.body.workspaces.map((w: { id: string }) => w.id)).toEqual([mine.body.workspace_id])
    expect((await h.inject('GET', `/v1/workspaces/${mine.body.workspace_id}`, { token: member.token })).status).toBe(200)

    const ro = await h.key(org.orgId, 'read_only')
    expect((await submit({ role_name: 'coder', description: 'x' }, ro.value)).body.error.code).toBe('permission_denied')
    const keyed = await h.key(org.orgId, 'submit_observe')
    const byKey = await submit({ role_name: 'coder', description: 'crash' }, keyed.value)
    expect((await rig.store.workspaces.byId(byKey.body.workspace_id))!.created_by).toBe(keyed.id)

    const other = await h.newOrg()
    const cross = await h.inject('GET', `/v1/workspaces/${theirs.body.workspace_id}`, { token: other.ownerKey })
    expect([cross.status, cross.body.error.code]).toEqual([404, 'workspace_not_found'])
    expect((await h.inject('GET', `/v1/tasks/${theirs.body.task_id}`, { token: other.ownerKey })).status).toBe(404)
    expect((await h.inject('GET', `/v1/workspaces/${theirs.body.workspace_id}/snapshot/files`, { token: other.ownerKey })).status).toBe(404)
  })

  it('a runtime that cannot run here refuses new work with its reason (503) and keeps reads working', async () => {
    h.deps.lifecycle = { available: false, reason: 'the local workspace runtime cannot run here: bwrap is not installed', controller: rig.controller }
    try {
      const res = await submit({ role_name: 'coder', description: 'x' })
      expect([res.status, res.body.error.code]).toEqual([503, 'service_unavailable'])
      expect(res.body.error.message).toContain('bwrap is not installed')
      expect((await h.inject('POST', '/v1/workspaces', { token: org.ownerKey, body: { role_name: 'coder' } })).status).toBe(503)
      expect((await h.inject('GET', '/v1/workspaces', { token: org.ownerKey })).status).toBe(200)
    } finally {
      h.deps.lifecycle = { available: true, controller: rig.controller }
    }
  })

  it('snapshot listing before any snapshot is not found', async () => {
    const pending = await rig.store.workspaces.create(org.orgId, { role_id: roleId, created_by: 'x', created_by_user_id: 'x' })
    const res = await h.inject('GET', `/v1/workspaces/${pending}/snapshot/files`, { token: org.ownerKey })
    expect([res.status, res.body.error.code]).toEqual([404, 'not_found'])
  })

  it('tenant posture refuses task create; the per-org rate limit answers 429 with Retry-After', async () => {
    const o = await h.newOrg()
    await newRole(o.orgId, 'coder')
    await h.store.orgs.setPosture(o.orgId, 'past_due')
    const refused = await submit({ role_name: 'coder', description: 'x' }, o.ownerKey)
    expect([refused.status, refused.body.error.code]).toEqual([403, 'tenant_inactive'])
    await h.store.orgs.setPosture(o.orgId, 'active')

    const h2 = await createHarness({ open: dialect.open })
    const rig2 = await controllerRig(h2.store)
    try {
      h2.deps.lifecycle = { available: true, controller: rig2.controller }
      h2.deps.config.taskRateLimit = { capacity: 1, refillPerSecond: 0.01 }
      const o2 = await h2.newOrg()
      const prov = await proxyTables(h2.store.db).workspaces.createProvider(o2.orgId, { name: 'p' })
      await proxyTables(h2.store.db).workspaces.createRole(o2.orgId, { name: 'coder', provider_id: prov })
      const first = await h2.inject('POST', '/v1/tasks', { token: o2.ownerKey, body: { role_name: 'coder', description: 'crash' } })
      expect(first.status).toBe(202)
      const second = await h2.inject('POST', `/v1/workspaces/${first.body.workspace_id}/tasks`, { token: o2.ownerKey, body: { description: 'x' } })
      expect([second.status, second.body.error.code]).toEqual([429, 'rate_limited'])
      expect(Number(second.headers['retry-after'])).toBeGreaterThan(0)
      await wsState2(rig2, first.body.workspace_id)
    } finally {
      await rig2.close()
      await h2.close()
    }
  })
})

async function wsState2(rig: ControllerRig, id: string): Promise<void> {
  await waitFor(async () => (await rig.store.workspaces.tasks.active(id)) === undefined, 'task settled')
}
