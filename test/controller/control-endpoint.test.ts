// The proxy's control endpoint (corral.internal) on real sockets: an agent's event callback with
// a valid capability token reaches the registered handler and writes no policy_decision; without a
// token, or with a bad one, it is denied like any other request (one decision row); a proxy with no
// handler registered treats the host as any other upstream.
import { afterEach, describe, expect, it } from 'vitest'
import { registerControlEndpoint, type ControlEndpointHandler } from '../../src/proxy/control-endpoint.js'
import type { CapabilityClaims } from '../../src/proxy/token.js'
import { startHarness, type Harness } from '../proxy/harness.js'

describe('proxy control endpoint (corral.internal)', () => {
  let h: Harness | undefined
  afterEach(async () => {
    await h?.close()
    h = undefined
  })

  const recorder = () => {
    const seen: Array<{ claims: CapabilityClaims; method: string; path: string; body: string }> = []
    const handler: ControlEndpointHandler = {
      async handle(claims, method, path, body) {
        seen.push({ claims, method, path, body: body.toString('utf8') })
        return { status: 202, body: { status: 'accepted' } }
      },
    }
    return { seen, handler }
  }

  it('hands a token-bearing callback to the handler with the verified claims; no decision row', async () => {
    h = await startHarness()
    const { seen, handler } = recorder()
    const unregister = registerControlEndpoint(h.audit, handler)
    const { workspaceId } = await h.workspace(null)
    const token = await h.token(workspaceId, { task: 'task_abc' })
    const res = await h.fetch('https://corral.internal/task/task_abc/event', { token, method: 'POST', body: JSON.stringify({ type: 'task_start' }), headers: { 'content-type': 'application/json' } })
    expect(res.status).toBe(202)
    expect(JSON.parse(res.body)).toEqual({ status: 'accepted' })
    expect(seen).toEqual([{ claims: expect.objectContaining({ org_id: h.orgId, workspace_id: workspaceId, task_id: 'task_abc' }), method: 'POST', path: '/task/task_abc/event', body: '{"type":"task_start"}' }])
    expect(h.audit.decisions()).toHaveLength(0)
    unregister()
  })

  it('without a token or with a forged one the request is denied with one policy_decision and never reaches the handler', async () => {
    h = await startHarness()
    const { seen, handler } = recorder()
    registerControlEndpoint(h.audit, handler)
    const none = await h.fetch('https://corral.internal/task/t/event', { method: 'POST', body: '{}' })
    expect(none.headers.get('x-corral-deny-reason')).toBe('no_token')
    const forged = await h.fetch('https://corral.internal/task/t/event', { token: 'not-a-token', method: 'POST', body: '{}' })
    expect(forged.headers.get('x-corral-deny-reason')).toBe('invalid_token')
    const rows = await h.audit.waitForDecisions(2)
    expect(rows.map((r) => [r.decision, r.reason, r.destination])).toEqual([['deny', 'no_token', 'corral.internal'], ['deny', 'invalid_token', 'corral.internal']])
    expect(seen).toHaveLength(0)
  })

  it('with no handler registered the host goes through policy like any other', async () => {
    h = await startHarness()
    const { workspaceId, token } = await h.workspace(null)
    const res = await h.fetch('https://corral.internal/task/t/event', { token, method: 'POST', body: '{}' })
    expect(res.headers.get('x-corral-deny-reason')).toBe('no_policy')
    const [row] = await h.audit.waitForDecisions(1)
    expect(row).toMatchObject({ decision: 'deny', reason: 'no_policy', workspace_id: workspaceId })
  })
})
