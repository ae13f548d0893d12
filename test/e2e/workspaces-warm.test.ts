// Warm pools on real processes: `corral serve` keeps one pool member of a role with its reference
// agent already running and long-polling `GET /tasks/next` through the proxy. `POST /v1/tasks`
// claims that member; the waiting agent gets the task with its own capability token, runs it
// against the fake Anthropic API and completes it; its model calls are attributed to the task (the
// adopted token), and the agent then ends (410) so the workspace snapshots and goes idle.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startStack, type Stack } from '../helpers/serve.js'
import { bwrapAvailable } from '../runtime/helpers.js'

const RUNTIME = (await bwrapAvailable()) ? 'local' : 'process'

const CAPS = `
- name: model
  type: http
  allow:
    - domains: ["127.0.0.1"]
      methods: [POST]
      paths: [/v1/messages]
  budgets:
    counters:
      - name: calls
        source: request.count
        task: {max: 100}
`

function script(body: any) {
  const last = body.messages.at(-1)
  const sawResults = Array.isArray(last?.content) && last.content.some((c: any) => c.type === 'tool_result')
  if (sawResults) return { text: 'Done.', tools: [{ name: 'finish', input: { summary: 'warm done' } }], usage: { input: 20, output: 5 } }
  return { tools: [{ name: 'write_file', input: { path: 'warm.txt', content: 'from a warm agent\n' } }], usage: { input: 30, output: 7 } }
}

describe(`warm pool end to end (${RUNTIME} runtime)`, () => {
  let stack: Stack

  beforeAll(async () => {
    stack = await startStack({ runtime: RUNTIME, model: script, role: { name: 'warm', capabilities: CAPS, pool_policy: 'static', pool_size: 1 } })
  })
  afterAll(() => stack?.close())

  it('a task claims the pool member whose agent was already waiting, runs and completes there', async () => {
    const member = await stack.until(async () => {
      const list = (await stack.api('GET', '/workspaces?state=idle')).body
      return (list.workspaces as any[]).find((w: any) => w.pooled && w.role_id === stack.role!.id)
    }, 'an idle pool member')

    const created = await stack.api('POST', '/tasks', { role_name: 'warm', description: 'Write warm.txt' })
    expect(created.status).toBe(202)
    expect(created.body.workspace_id).toBe(member.id)
    const taskId: string = created.body.task_id
    const done = await stack.until(async () => {
      const t = (await stack.api('GET', `/tasks/${taskId}`)).body
      return ['completed', 'failed', 'cancelled'].includes(t.status) && t
    }, 'the warm task')
    expect(done).toMatchObject({ status: 'completed', summary: 'warm done' })
    await stack.until(async () => { const w = (await stack.api('GET', `/workspaces/${member.id}`)).body; return w.state === 'idle' && w.task_count === 1 }, 'idle after the task')

    // The model calls carry the task: the agent adopted the task's token at the handover.
    const decisions = await stack.audit(member.id, 'event_type=policy_decision')
    expect(decisions.length).toBe(2)
    for (const d of decisions) expect(d).toMatchObject({ decision: 'allow', task_id: taskId, debits: { calls: 1 } })
    const agent = await stack.audit(member.id, 'actor=agent')
    expect(agent.map((e) => e.event_type)).toEqual(expect.arrayContaining(['session_start', 'task_start', 'file_change', 'task_end']))
    expect(agent.every((e) => e.task_id === taskId && e.debits?.requests === 1)).toBe(true)
    const files = (await stack.api('GET', `/workspaces/${member.id}/snapshot/files`)).body.entries.map((e: any) => e.path)
    expect(files).toContain('warm.txt')
  })
})
