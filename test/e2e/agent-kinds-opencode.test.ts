// OpenCode as a workspace agent, end to end: the built `corral serve`, the local (bubblewrap)
// runtime, the real OpenCode native binary from npm mounted read-only, every request through the
// policy proxy to the fake model's Anthropic Messages API (HTTPS on loopback) steered by the
// prompt (src/dev/cli-script.ts): OpenCode writes a file (`write`) and runs a command (`bash`).
// Then a follow-up that continues its session and a fresh one that does not, a cancel
// mid-command that leaves no process behind, a model error, and a policy deny of the model call.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { cliScript, modelPolicy } from '../../src/dev/index.js'
import { AGENT_RUNTIME, denyModelCaps, hostRuns, taskWaits } from '../helpers/agent-kinds.js'
import { onLoopback, portOf } from '../helpers/loopback-caps.js'
import { startStack, type Stack } from '../helpers/serve.js'

const CAPS = modelPolicy({ domain: '127.0.0.1', identity: true, outputTokens: { reserve: 100, failureCharge: 10, workspaceMax: 100_000, taskMax: 50_000 } })
const DENY_CAPS = denyModelCaps('/v1/models')
const SLEEP = 'sleep 4444'

describe(`opencode agent kind end to end (${AGENT_RUNTIME} runtime)`, () => {
  let stack: Stack
  let wsId: string
  let firstTask: string
  const { idleAfter, taskDone, followUp } = taskWaits(() => stack, () => wsId, { idleMs: 90_000 })

  beforeAll(async () => {
    stack = await startStack({ runtime: AGENT_RUNTIME, model: cliScript(), role: { name: 'opencode', agent_kind: 'opencode', capabilities: CAPS } })
  }, 60_000)
  afterAll(() => stack?.close())

  it('runs OpenCode: it writes a file and runs a command; events in order; a decision row for every request it made', async () => {
    const submitted = await stack.api('POST', '/tasks', { role_name: 'opencode', description: 'Greet the team' })
    expect(submitted.status, JSON.stringify(submitted.body)).toBe(202)
    firstTask = submitted.body.task_id
    wsId = submitted.body.workspace_id
    const task = await taskDone(firstTask)
    expect(task, JSON.stringify(task) + stack.serve.output().slice(-4000)).toMatchObject({ status: 'completed', summary: 'Done: wrote hello.md and ran a command. Tool results before this prompt: 0.' })
    await idleAfter(wsId, 1)
    const files = (await stack.api('GET', `/workspaces/${wsId}/snapshot/files`)).body.entries.map((e: any) => e.path)
    expect(files).toContain('hello.md')

    const events = await stack.audit(wsId, 'actor=agent', `task_id=${firstTask}`)
    const types = events.map((e) => e.event_type).filter((t) => t !== 'progress_status')
    expect(types).toEqual([
      'session_start', 'task_start',
      'iteration_start', 'agent_response', 'tool_call', 'tool_result', 'file_change',
      'iteration_start', 'agent_response', 'tool_call', 'tool_result',
      'iteration_start', 'agent_response', 'task_end', 'session_end',
    ])
    const byType = (t: string) => events.filter((e) => e.event_type === t).map((e) => e.detail)
    expect(byType('session_start')[0]).toMatchObject({ agent_kind: 'opencode', provider: 'anthropic', model: 'claude-test', resumed: false })
    expect(byType('tool_call').map((d) => d.tool)).toEqual(['write', 'bash'])
    expect(byType('tool_call')[1].input).toMatchObject({ command: 'ls && wc -w hello.md' })
    expect(byType('tool_result').map((d) => d.is_error)).toEqual([false, false])
    expect(byType('file_change').map((d) => [d.path, d.action])).toEqual([['hello.md', 'created']])
    expect(byType('task_end')[0]).toMatchObject({ status: 'completed', iterations: 3, usage: { output_tokens: 60 + 40 + 30 } })

    // The model calls (three turns and its session title) are allowed and metered; what else it
    // tried is denied, one row each (docs/agent.md "opencode").
    const decisions = (await stack.audit(wsId, 'event_type=policy_decision', `task_id=${firstTask}`)).filter((d) => !String(d.path).startsWith('/task/'))
    const model = decisions.filter((d) => d.path === '/v1/messages')
    expect(model.map((d) => [d.decision, d.capability_name, d.method])).toEqual(Array(stack.model!.requests.length).fill(['allow', 'model', 'POST']))
    expect(decisions.filter((d) => d.path !== '/v1/messages').map((d) => [d.decision, d.destination])).toEqual(decisions.filter((d) => d.path !== '/v1/messages').map(() => ['deny', 'registry.npmjs.org']))
  }, 180_000)

  it('a follow-up continues the OpenCode session; a fresh-session follow-up starts a new one', async () => {
    const resumed = await followUp('fake:text what did you do?')
    expect(await taskDone(resumed)).toMatchObject({ status: 'completed', summary: 'A text answer from the fake model (2 tool results before this prompt).' })
    await idleAfter(wsId, 2)
    const again = (await stack.audit(wsId, 'event_type=session_start', `task_id=${resumed}`))[0].detail
    expect(again).toMatchObject({ session_id: expect.stringMatching(/^ses_/), resumed: true })
    const fresh = await followUp('fake:text fresh start', { reset_session: true })
    expect(await taskDone(fresh)).toMatchObject({ status: 'completed', summary: 'A text answer from the fake model (0 tool results before this prompt).' })
    await idleAfter(wsId, 3)
    const freshStart = (await stack.audit(wsId, 'event_type=session_start', `task_id=${fresh}`))[0].detail
    expect(freshStart).toMatchObject({ resumed: false, reset: true })
  }, 180_000)

  it('cancel mid-command stops OpenCode and what it started', async () => {
    const slow = await followUp(`wait a while fake:${SLEEP.replace(' ', '-')}`)
    await stack.until(async () => hostRuns(SLEEP), 'OpenCode to start its command', 60_000)
    const c = await stack.api('POST', `/tasks/${slow}/cancel`)
    expect(c.status, JSON.stringify(c.body)).toBe(200)
    expect(await taskDone(slow)).toMatchObject({ status: 'cancelled', reason: 'cancelled_by_user' })
    await stack.until(async () => !hostRuns(SLEEP), 'the command to be gone', 30_000)
    await stack.until(async () => (await stack.api('GET', `/workspaces/${wsId}`)).body.state === 'idle', 'idle after cancel', 60_000)
  }, 180_000)

  it('a model error (a 400 the API refuses) fails the task with OpenCode\'s error', async () => {
    const bad = await followUp('this will fail fake:400')
    const done = await taskDone(bad)
    expect(done, JSON.stringify(done)).toMatchObject({ status: 'failed' })
    expect(done.summary).toMatch(/Invalid request \(scripted by the fake model\)/)
  }, 180_000)

  it('a policy deny of the model call fails the task naming the deny', async () => {
    const caps = onLoopback(DENY_CAPS, portOf(stack.model!.url))
    const role = await stack.api('POST', '/agent-roles', { name: 'opencode-denied', agent_kind: 'opencode', provider_id: stack.provider!.id, capabilities: caps })
    expect(role.status, JSON.stringify(role.body)).toBe(201)
    const r = await stack.api('POST', '/tasks', { role_name: 'opencode-denied', description: 'Greet the team' })
    expect(r.status).toBe(202)
    const done = await taskDone(r.body.task_id)
    expect(done, JSON.stringify(done)).toMatchObject({ status: 'failed', reason: 'policy_denied' })
    expect(done.summary).toMatch(/denied by the proxy \(no_match\)/)
  }, 180_000)
})
