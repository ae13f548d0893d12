import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { WorkspaceDirectory } from '../../src/server/types.js'
import { createHarness, type Harness } from './harness.js'

/** The workspace part provides the real directory; here a map stands in for its table. */
const workspaces = new Map<string, { org: string; id: string; created_by: string }>()
const directory: WorkspaceDirectory = {
  async get(orgId, id) {
    const ws = workspaces.get(id)
    return ws && ws.org === orgId ? { id: ws.id, created_by: ws.created_by } : undefined
  },
}

describe('audit routes', () => {
  let h: Harness
  beforeAll(async () => {
    h = await createHarness({ workspaces: directory })
  })
  afterAll(() => h.close())

  const seed = async (orgId: string, rows: Array<{ user_id: string; workspace_id?: string; event_type?: 'task_submitted' | 'workspace_created' }>) => {
    for (const r of rows) {
      await h.audit.emit({ org_id: orgId, user_id: r.user_id, event_type: r.event_type ?? 'task_submitted', category: 'activity', actor: 'control-plane', ...(r.workspace_id ? { workspace_id: r.workspace_id } : {}), detail: { description: 'x' } })
    }
    await h.audit.flush()
  }

  it('pages with opaque cursors and refuses tampered or foreign cursors', async () => {
    const { orgId, ownerKey } = await h.newOrg()
    await seed(orgId, Array.from({ length: 5 }, () => ({ user_id: 'system' })))
    const first = await h.inject('GET', '/v1/audit?filter=event_type=task_submitted&limit=2', { token: ownerKey })
    expect(first.status).toBe(200)
    expect(first.body.events).toHaveLength(2)
    expect(first.body.cursor).toEqual(expect.any(String))
    const second = await h.inject('GET', `/v1/audit?filter=event_type=task_submitted&limit=2&cursor=${encodeURIComponent(first.body.cursor)}`, { token: ownerKey })
    expect(second.body.events[0].id).not.toBe(first.body.events[0].id)
    const third = await h.inject('GET', `/v1/audit?filter=event_type=task_submitted&limit=2&cursor=${encodeURIComponent(second.body.cursor)}`, { token: ownerKey })
    expect(third.body.events).toHaveLength(1)
    expect(third.body.cursor).toBeUndefined()

    const tampered = first.body.cursor.slice(0, -2) + (first.body.cursor.endsWith('AA') ? 'BB' : 'AA')
    for (const cursor of [tampered, 'garbage']) {
      const res = await h.inject('GET', `/v1/audit?filter=event_type=task_submitted&limit=2&cursor=${encodeURIComponent(cursor)}`, { token: ownerKey })
      expect(res.status).toBe(400)
      expect(res.body.error.code).toBe('invalid_cursor')
    }
    // The same cursor under another query, or in another org, does not belong there.
    expect((await h.inject('GET', `/v1/audit?limit=2&cursor=${encodeURIComponent(first.body.cursor)}`, { token: ownerKey })).body.error.code).toBe('invalid_cursor')
    const other = await h.newOrg()
    expect((await h.inject('GET', `/v1/audit?filter=event_type=task_submitted&limit=2&cursor=${encodeURIComponent(first.body.cursor)}`, { token: other.ownerKey })).body.error.code).toBe('invalid_cursor')
  })

  it('validates filters, limits and dates', async () => {
    const { ownerKey } = await h.newOrg()
    const bad = async (qs: string) => (await h.inject('GET', `/v1/audit?${qs}`, { token: ownerKey })).body.error
    expect((await bad('filter=password=x')).code).toBe('invalid_query')
    expect((await bad('limit=0')).code).toBe('validation_error')
    expect((await bad('limit=10001')).code).toBe('validation_error')
    expect((await bad('limit=ten')).code).toBe('validation_error')
    expect((await bad('order=sideways')).code).toBe('validation_error')
    expect((await bad('from=yesterday')).code).toBe('validation_error')
    expect((await h.inject('GET', '/v1/audit?limit=10000', { token: ownerKey })).status).toBe(200)
    expect((await h.inject('GET', '/v1/audit/stats?metric=median:latency_ms', { token: ownerKey })).body.error.code).toBe('invalid_query')
    expect((await h.inject('GET', '/v1/audit/stats?group_by=secret_column', { token: ownerKey })).body.error.code).toBe('invalid_query')
  })

  it('narrows audit:read:own to the caller\'s user_id, in queries and stats', async () => {
    const { orgId, ownerToken } = await h.newOrg()
    const m = await h.member(orgId, 'member')
    await seed(orgId, [{ user_id: m.userId }, { user_id: m.userId }, { user_id: 'system' }, { user_id: 'usr_someone_else' }])
    const mine = await h.inject('GET', '/v1/audit?filter=event_type=task_submitted', { token: m.token })
    expect(mine.body.events.map((e: { user_id: string }) => e.user_id)).toEqual([m.userId, m.userId])
    const all = await h.inject('GET', '/v1/audit?filter=event_type=task_submitted', { token: ownerToken })
    expect(all.body.events).toHaveLength(4)
    const stats = await h.inject('GET', '/v1/audit/stats?group_by=event_type&filter=event_type=task_submitted', { token: m.token })
    expect(stats.status).toBe(200)
    expect(stats.body.buckets).toEqual([{ group: { event_type: 'task_submitted' }, value: 2 }])
  })

  it('scopes workspace audit to the workspace, checks the creator for :own, and hides other orgs', async () => {
    const { orgId, ownerToken } = await h.newOrg()
    const creator = await h.member(orgId, 'member')
    const bystander = await h.member(orgId, 'member')
    const wsId = `ws_${orgId}`
    workspaces.set(wsId, { org: orgId, id: wsId, created_by: creator.userId })
    await seed(orgId, [{ user_id: creator.userId, workspace_id: wsId }, { user_id: 'usr_other_actor', workspace_id: wsId }, { user_id: creator.userId, workspace_id: 'ws_elsewhere' }])

    const own = await h.inject('GET', `/v1/workspaces/${wsId}/audit`, { token: creator.token })
    expect(own.status).toBe(200)
    expect(own.body.events).toHaveLength(2) // no user_id narrowing on workspace routes
    expect(own.body.events.every((e: { workspace_id: string }) => e.workspace_id === wsId)).toBe(true)
    const stats = await h.inject('GET', `/v1/workspaces/${wsId}/audit/stats`, { token: creator.token })
    expect(stats.body.buckets).toEqual([{ group: {}, value: 2 }])
    expect((await h.inject('GET', `/v1/workspaces/${wsId}/audit`, { token: bystander.token })).body.error.code).toBe('permission_denied')
    expect((await h.inject('GET', `/v1/workspaces/${wsId}/audit`, { token: ownerToken })).status).toBe(200)

    const other = await h.newOrg()
    const cross = await h.inject('GET', `/v1/workspaces/${wsId}/audit`, { token: other.ownerToken })
    expect(cross.status).toBe(404)
    expect(cross.body.error.code).toBe('workspace_not_found')
    expect((await h.inject('GET', '/v1/workspaces/ws_missing/audit/stats', { token: ownerToken })).status).toBe(404)
  })
})
