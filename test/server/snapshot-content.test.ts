// GET /v1/workspaces/{id}/snapshot/content over the real app, a real store and the workspace
// controller (process runtime, stand-in agent): a file's bytes, a directory as a tar, `snapshot=N`,
// and every refusal as the error envelope — no snapshot yet, missing path, traversal, a link,
// another org, a `:own` caller who is not the creator. The stores' reading itself:
// test/runtime/snapshot-content.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { proxyTables } from '../../src/store/proxy-tables.js'
import { controllerRig, waitFor, type ControllerRig } from '../workspaces/harness.js'
import { createHarness, type Harness } from './harness.js'

describe('GET /v1/workspaces/{id}/snapshot/content', () => {
  let h: Harness
  let rig: ControllerRig
  let org: Awaited<ReturnType<Harness['newOrg']>>
  let wsId: string

  beforeAll(async () => {
    h = await createHarness()
    rig = await controllerRig(h.store)
    h.deps.lifecycle = { available: true, controller: rig.controller }
    h.deps.workspaces = { get: async (o, id) => { const w = await rig.controller.get(o, id); return w && { id: w.id, created_by: w.created_by } } }
    h.deps.config.taskRateLimit = false
    org = await h.newOrg()
    const t = proxyTables(h.store.db).workspaces
    await t.createRole(org.orgId, { name: 'coder', provider_id: await t.createProvider(org.orgId, { name: 'prov' }) })
  })
  afterAll(async () => {
    await rig?.close()
    await h?.close()
  })

  const idle = (id: string, tasks: number) => waitFor(async () => {
    const w = await rig.store.workspaces.byId(id)
    return w?.state === 'idle' && w.task_count === tasks
  }, `workspace idle after ${tasks} tasks`)
  const content = (query: string, token = org.ownerKey) => h.inject('GET', `/v1/workspaces/${wsId}/snapshot/content${query}`, { token })

  it('before any snapshot: not_found; then a file, a directory as a tar, an older snapshot by task count', async () => {
    const res = await h.inject('POST', '/v1/workspaces', { token: org.ownerKey, body: { role_name: 'coder' } })
    wsId = res.body.id
    expect((await content('?path=a.txt')).body.error.code).toBe('not_found')
    await h.inject('POST', `/v1/workspaces/${wsId}/tasks`, { token: org.ownerKey, body: { description: 'write a.txt alpha' } })
    await idle(wsId, 1)
    await h.inject('POST', `/v1/workspaces/${wsId}/tasks`, { token: org.ownerKey, body: { description: 'link ln.txt /etc/passwd' } })
    await idle(wsId, 2)

    const file = await content('?path=a.txt')
    expect(file.status).toBe(200)
    expect(file.raw).toBe('alpha')
    expect(file.headers).toMatchObject({ 'corral-entry-type': 'file', 'content-type': 'application/octet-stream', 'content-length': '5', 'x-content-type-options': 'nosniff' })
    expect(String(file.headers['content-disposition'])).toContain("filename*=UTF-8''a.txt")

    const all = await content('')
    expect(all.headers).toMatchObject({ 'corral-entry-type': 'snapshot', 'content-type': 'application/x-tar' })
    expect(all.raw).toContain('a.txt')
    expect(all.raw).toContain('tasks.log')
    expect((await content('?path=ln.txt&snapshot=1')).body.error.code).toBe('not_found')
    expect((await content('?path=a.txt&snapshot=1')).raw).toBe('alpha')
    expect((await content('?path=a.txt&snapshot=9')).body.error).toMatchObject({ code: 'not_found', message: expect.stringContaining('after 9 tasks') })
  })

  it('refusals are envelopes: traversal, absolute, a symbolic link, a missing file, bad snapshot, other org, :own', async () => {
    for (const p of ['../etc/passwd', '/etc/passwd', 'x/../a.txt']) {
      const r = await content(`?path=${encodeURIComponent(p)}`)
      expect(r.status, p).toBe(400)
      expect(r.body.error).toMatchObject({ code: 'validation_error', details: { fields: { path: expect.any(String) } } })
    }
    const link = await content('?path=ln.txt')
    expect(link.status).toBe(400)
    expect(link.body.error.message).toContain('symbolic link to /etc/passwd')
    expect((await content('?path=nope')).status).toBe(404)
    expect((await content('?snapshot=x')).body.error.code).toBe('validation_error')
    const other = await h.newOrg()
    expect((await content('?path=a.txt', other.ownerKey)).body.error.code).toBe('workspace_not_found')
    const member = await h.member(org.orgId, 'member')
    expect((await content('?path=a.txt', member.token)).body.error.code).toBe('permission_denied')
    const ro = await h.key(org.orgId, 'read_only')
    expect((await content('?path=a.txt', ro.value)).raw).toBe('alpha')
  })
})
