// The proxy's second door (corral.internal) on real sockets: an agent's event callback with a
// valid capability token reaches the handler the proxy was built with (`agentCallbacks`) and
// writes no policy_decision; without a token, or with a bad one, it is denied like any other
// request (one decision row); a proxy with no handler treats the host as any other upstream. The `charge` it hands the handler
// debits the policy's `agent_events` counters through the proxy's real budgets (default: one
// `requests` unit, no ceiling) and refuses a spent ceiling with budget_exhausted.
import { afterEach, describe, expect, it } from 'vitest'
import type { AgentCallbackHandler, CapabilityClaims } from '../../src/contract/index.js'
import { startHarness, type Harness } from './harness.js'

describe('proxy agent callbacks (corral.internal)', () => {
  let h: Harness | undefined
  afterEach(async () => {
    await h?.close()
    h = undefined
  })

  const recorder = () => {
    const seen: Array<{ claims: CapabilityClaims; method: string; path: string; body: string }> = []
    const handler: AgentCallbackHandler = {
      async handle(claims, method, path, body) {
        seen.push({ claims, method, path, body: body.toString('utf8') })
        return { status: 202, body: { status: 'accepted' } }
      },
    }
    return { seen, handler }
  }

  it('hands a token-bearing callback to the handler with the verified claims; no decision row', async () => {
    const { seen, handler } = recorder()
    h = await startHarness({ agentCallbacks: () => handler })
    const { workspaceId } = await h.workspace(null)
    const token = await h.token(workspaceId, { task: 'task_abc' })
    const res = await h.fetch('https://corral.internal/task/task_abc/event', { token, method: 'POST', body: JSON.stringify({ type: 'task_start' }), headers: { 'content-type': 'application/json' } })
    expect(res.status).toBe(202)
    expect(JSON.parse(res.body)).toEqual({ status: 'accepted' })
    expect(seen).toEqual([{ claims: expect.objectContaining({ org_id: h.orgId, workspace_id: workspaceId, task_id: 'task_abc' }), method: 'POST', path: '/task/task_abc/event', body: '{"type":"task_start"}' }])
    expect(h.audit.decisions()).toHaveLength(0)
  })

  it('without a token or with a forged one the request is denied with one policy_decision and never reaches the handler', async () => {
    const { seen, handler } = recorder()
    h = await startHarness({ agentCallbacks: () => handler })
    // No token at all: the CONNECT is answered 407 (a challenge), with its no_token row; no tunnel.
    const none = await h.fetch('https://corral.internal/task/t/event', { method: 'POST', body: '{}' }).then(() => 'tunnelled', (e: Error & { cause?: Error & { cause?: Error } }) => e.cause?.cause?.message)
    expect(none).toMatch(/\(407\)/)
    const forged = await h.fetch('https://corral.internal/task/t/event', { token: 'not-a-token', method: 'POST', body: '{}' })
    expect(forged.headers.get('x-corral-deny-reason')).toBe('invalid_token')
    const rows = await h.audit.waitForDecisions(2)
    expect(rows.map((r) => [r.decision, r.reason, r.destination])).toEqual([['deny', 'no_token', 'corral.internal'], ['deny', 'invalid_token', 'corral.internal']])
    expect(seen).toHaveLength(0)
  })

  it('with no handler the host goes through policy like any other', async () => {
    h = await startHarness()
    const { workspaceId, token } = await h.workspace(null)
    const res = await h.fetch('https://corral.internal/task/t/event', { token, method: 'POST', body: '{}' })
    expect(res.headers.get('x-corral-deny-reason')).toBe('no_policy')
    const [row] = await h.audit.waitForDecisions(1)
    expect(row).toMatchObject({ decision: 'deny', reason: 'no_policy', workspace_id: workspaceId })
  })

  const charging = (): AgentCallbackHandler => ({
    async handle(_claims, _method, _path, _body, charge) {
      const c = await charge!()
      return c.ok ? { status: 202, body: { debits: c.debits, budget_state: c.budget_state } } : { status: c.status, body: { error: { code: c.reason, details: c.detail } } }
    },
  })
  const post = (hh: Harness, token: string) => hh.fetch('https://corral.internal/task/task_abc/event', { token, method: 'POST', body: '{"type":"task_start"}', headers: { 'content-type': 'application/json' } })

  it('charges the agent_events capability counters; a spent ceiling answers 429 budget_exhausted', async () => {
    h = await startHarness({ agentCallbacks: charging })
    const { workspaceId } = await h.workspace(`
- name: agent_events
  type: http
  allow:
    - domains: ["corral.internal"]
      methods: [POST]
  budgets:
    counters:
      - name: events
        source: request.count
        workspace: { max: 2 }
`)
    const token = await h.token(workspaceId, { task: 'task_abc' })
    for (let i = 0; i < 2; i++) {
      const ok = await post(h, token)
      expect(ok.status).toBe(202)
      expect(JSON.parse(ok.body)).toMatchObject({ debits: { events: 1 } })
    }
    const spent = await post(h, token)
    expect(spent.status).toBe(429)
    expect(JSON.parse(spent.body)).toMatchObject({ error: { code: 'budget_exhausted', details: { counter: 'events', scope: 'workspace', max: 2 } } })
  })

  it('without an agent_events capability each event debits one `requests` unit with no ceiling', async () => {
    h = await startHarness({ agentCallbacks: charging })
    const { workspaceId } = await h.workspace(null)
    const token = await h.token(workspaceId, { task: 'task_abc' })
    for (let i = 0; i < 3; i++) {
      const ok = await post(h, token)
      expect(ok.status).toBe(202)
      expect(JSON.parse(ok.body)).toMatchObject({ debits: { requests: 1 }, budget_state: { requests: { workspace: { max: 0 } } } })
    }
  })
})
