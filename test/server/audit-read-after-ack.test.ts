// An audit read answers with every event this process acknowledged before it, even while the
// journaled writer's database batch is still waiting to fill (docs/audit.md "How soon a row shows").
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openAuditWriter } from '../../src/audit/index.js'
import type { WorkspaceDirectory } from '../../src/server/types.js'
import { testDialects } from '../helpers/dialects.js'
import { createHarness, type Harness } from './harness.js'

const directory: WorkspaceDirectory = {
  async get(_orgId, id) {
    return { id, created_by: 'system' }
  },
}

for (const d of testDialects()) {
  describe(`audit reads after an acknowledged emit, journal on [${d.name}]`, () => {
    const dir = mkdtempSync(join(tmpdir(), 'corral-read-after-ack-'))
    let h: Harness
    beforeAll(async () => {
      // A linger far longer than the test: a row reaches the database only if the read asks for it.
      h = await createHarness({ open: d.open, workspaces: directory, audit: (store) => openAuditWriter(store, { journalDir: join(dir, 'journal'), dbLingerMs: 600_000 }) })
    })
    afterAll(async () => {
      await h.close()
      rmSync(dir, { recursive: true, force: true })
    })

    const emit = (orgId: string, n: number) =>
      Promise.all(Array.from({ length: n }, () => h.audit.emit({ org_id: orgId, user_id: 'system', event_type: 'task_submitted', category: 'activity', actor: 'control-plane', workspace_id: 'ws_read', detail: { description: 'x' } })))

    it('GET /v1/audit lists the events acknowledged before it', async () => {
      const { orgId, ownerKey } = await h.newOrg()
      const events = await emit(orgId, 3)
      const page = await h.inject('GET', '/v1/audit?filter=event_type=task_submitted', { token: ownerKey })
      expect(page.status).toBe(200)
      expect(page.body.events.map((e: { id: string }) => e.id).sort()).toEqual(events.map((e) => e.id).sort())
    })

    it('GET /v1/workspaces/{id}/audit lists them too', async () => {
      const { orgId, ownerKey } = await h.newOrg()
      const events = await emit(orgId, 2)
      const page = await h.inject('GET', '/v1/workspaces/ws_read/audit?filter=event_type=task_submitted', { token: ownerKey })
      expect(page.status).toBe(200)
      expect(page.body.events.map((e: { id: string }) => e.id).sort()).toEqual(events.map((e) => e.id).sort())
    })

    it('GET /v1/audit/stats and the workspace stats count them', async () => {
      const { orgId, ownerKey } = await h.newOrg()
      await emit(orgId, 4)
      const stats = await h.inject('GET', '/v1/audit/stats?group_by=event_type&filter=event_type=task_submitted', { token: ownerKey })
      expect(stats.status).toBe(200)
      expect(stats.body.buckets).toEqual([{ group: { event_type: 'task_submitted' }, value: 4 }])
      await emit(orgId, 1)
      const ws = await h.inject('GET', '/v1/workspaces/ws_read/audit/stats?group_by=event_type&filter=event_type=task_submitted', { token: ownerKey })
      expect(ws.status).toBe(200)
      expect(ws.body.buckets).toEqual([{ group: { event_type: 'task_submitted' }, value: 5 }])
    })
  })
}
