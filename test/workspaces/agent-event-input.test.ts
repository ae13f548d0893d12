// The agent callback shares the API's edge check (src/contract/input-limits.ts): an event whose body the
// audit row could not hold — nested thousands deep (it used to be accepted with 202 and then stall
// the audit writer for every org), or holding NUL or a lone surrogate — is a 400 validation_error
// naming the field, before the workspace is looked up, a budget is charged or a row is queued.
import { describe, expect, it } from 'vitest'
import type { AuditSink } from '../../src/contract/index.js'
import { AgentEvents, type AgentCallbackTarget } from '../../src/workspaces/index.js'

describe('agent events: input at the edge', () => {
  const emitted: unknown[] = []
  let charged = 0
  const sink = { emit: async (e: unknown) => emitted.push(e) } as unknown as AuditSink
  // Any use of the controller would mean the check came too late.
  const controller = new Proxy({}, { get: () => { throw new Error('controller reached') } }) as AgentCallbackTarget
  const events = new AgentEvents(controller, sink)
  const claims = { org_id: 'org_1', workspace_id: 'ws_1', task_id: 'task_1', exp: Date.now() / 1000 + 60 }
  const post = (text: string) => events.handle(claims, 'POST', '/task/task_1/event', Buffer.from(text), async () => ((charged++), { ok: true, debits: {}, budget_state: {} }) as never)

  it.each([
    ['nested 5,000 deep', `{"type":"current_status","message":"x","data":${'['.repeat(5_000)}${']'.repeat(5_000)}}`, 'data', 'deeper'],
    ['NUL in a value', '{"type":"current_status","message":"a\\u0000b"}', 'message', 'NUL'],
    ['lone surrogate', '{"type":"current_status","message":"\\ud800"}', 'message', 'surrogate'],
    ['NUL in a key', '{"type":"current_status","message":"x","k\\u0000":1}', 'body', 'key'],
  ])('%s → 400 validation_error, nothing charged or recorded', async (_name, text, field, problem) => {
    const reply = await post(text)
    expect(reply.status).toBe(400)
    const error = (reply.body as { error: { code: string; details: { fields: Record<string, string> } } }).error
    expect(error.code).toBe('validation_error')
    const [name, message] = Object.entries(error.details.fields)[0]!
    expect(name.startsWith(field)).toBe(true)
    expect(message).toContain(problem)
    expect(emitted).toEqual([])
    expect(charged).toBe(0)
  })
})

describe('agent events: the database away', () => {
  it('a store outage while handling an event is 503 + Retry-After, not a 500', async () => {
    const down = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })
    const controller = { get: async () => { throw down } } as unknown as AgentCallbackTarget
    const events = new AgentEvents(controller, { emit: async () => { throw new Error('not reached') } } as unknown as AuditSink)
    const claims = { org_id: 'org_1', workspace_id: 'ws_1', task_id: 'task_1', exp: Date.now() / 1000 + 60 }
    const reply = await events.handle(claims, 'POST', '/task/task_1/event', Buffer.from('{"type":"current_status","message":"hi"}'))
    expect(reply.status).toBe(503)
    expect(reply.headers?.['retry-after']).toBe('2')
    expect((reply.body as { error: { code: string } }).error.code).toBe('service_unavailable')
  })
})
