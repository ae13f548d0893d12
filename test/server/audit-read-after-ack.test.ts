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

    // Each route twice: a second batch acknowledged after the first read is committed by the next.
    it.each([
      ['GET /v1/audit', '/v1/audit?filter=event_type=task_submitted', 'events'],
      ['GET /v1/workspaces/{id}/audit', '/v1/workspaces/ws_read/audit?filter=event_type=task_submitted', 'events'],
      ['GET /v1/audit/stats', '/v1/audit/stats?group_by=event_type&filter=event_type=task_submitted', 'stats'],
      ['GET /v1/workspaces/{id}/audit/stats', '/v1/workspaces/ws_read/audit/stats?group_by=event_type&filter=event_type=task_submitted', 'stats'],
    ] as const)('%s answers with every event acknowledged before it', async (_route, url, shape) => {
      const { orgId, ownerKey } = await h.newOrg()
      const acknowledged: string[] = []
      for (const n of [3, 2]) {
        acknowledged.push(...(await emit(orgId, n)).map((e) => e.id))
        const res = await h.inject('GET', url, { token: ownerKey })
        expect(res.status).toBe(200)
        if (shape === 'events') expect(res.body.events.map((e: { id: string }) => e.id).sort()).toEqual([...acknowledged].sort())
        else expect(res.body.buckets).toEqual([{ group: { event_type: 'task_submitted' }, value: acknowledged.length }])
      }
    })
  })
}
