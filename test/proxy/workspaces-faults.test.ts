// The workspace registry runs from timers (eviction sweep) and bus callbacks (stop channel), where
// a rejected promise has no caller: a lifecycle row the audit sink refuses must be reported, not
// become an unhandled rejection that takes serve down.
import { describe, expect, it } from 'vitest'
import type { AuditSink } from '../../src/contract/index.js'
import { ActiveWorkspaces } from '../../src/proxy/workspaces.js'
import { compilePolicyCached } from '../../src/policy/index.js'

const refusing: AuditSink = { emit: () => Promise.reject(new Error('audit writer is closed')) }
const record = { id: 'ws_1', org_id: 'org_1', creator_user_id: 'usr_1', role: 'r', provider: 'p', environment: 'default', capabilities: null, state: 'idle' }

describe('ActiveWorkspaces with a refusing audit sink', () => {
  it('activation, deactivation and the eviction sweep resolve and report each refused row', async () => {
    const errors: string[] = []
    const teardown: string[] = []
    const ws = new ActiveWorkspaces({
      directory: { lookup: async (id) => (id === 'ws_1' ? record : undefined) },
      compile: compilePolicyCached, audit: refusing, ttlMs: 1,
      onTeardown: async (id) => {
        teardown.push(id)
        throw new Error('ledger gone')
      },
      onAuditError: (_err, type) => errors.push(type),
    })
    try {
      const got = await ws.get('org_1', 'ws_1')
      expect('ok' in got && got.ok).toBe(true)
      await expect(ws.deactivate('ws_1')).resolves.toBe(true)
      await ws.get('org_1', 'ws_1')
      await expect(ws.sweep(Date.now() + 1_000)).resolves.toBe(1)
      expect(errors).toEqual(['workspace_activated', 'workspace_deactivated', 'workspace_activated', 'workspace_evicted'])
      expect(teardown).toEqual(['ws_1', 'ws_1'])
    } finally {
      ws.close()
    }
  })
})
