// Gemini CLI as a workspace agent, end to end: the built `corral serve`, the local (bubblewrap)
// runtime, the real Gemini CLI bundle from npm mounted read-only and run with corral's node, every
// request through the policy proxy to the fake Gemini API (HTTPS on loopback) scripted to make the
// CLI write a file and run a command; a follow-up that resumes the CLI's session; a cancel
// mid-task; a model error; a role whose policy denies the model call.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { modelPolicy } from '../../src/dev/index.js'
import { AGENT_CLI_DIR, AGENT_RUNTIME, denyModelCaps, hostRuns, taskWaits } from '../helpers/agent-kinds.js'
import { onLoopback, portOf } from '../helpers/loopback-caps.js'
import { startStack, type Stack } from '../helpers/serve.js'

const CAPS = modelPolicy({ domain: '127.0.0.1', paths: ['/v1beta/models/*'], gemini: true, identity: true, outputTokens: { reserve: 100, failureCharge: 10, workspaceMax: 100_000, taskMax: 50_000 } })
const DENY_CAPS = denyModelCaps('/v1beta/models')
const SLEEP = 'sleep 4343'

type Content = { role: string; parts: Array<{ text?: string; functionResponse?: unknown; functionCall?: unknown }> }
const textOf = (c: Content): string => c.parts.map((p) => p.text ?? '').join('')

function script(body: any) {
  const contents: Content[] = body.contents ?? []
  // Side calls (routing, next-speaker checks) offer no tools: a short text.
  if (!body.tools?.length) return { text: 'ok', usage: { input: 5, output: 1 } }
  // After a cancel the resumed session answers the dangling call in the same turn as the new prompt.
  const taskAt = contents.findLastIndex((c) => c.role === 'user' && textOf(c).includes('TASK-'))
  const task = textOf(contents[taskAt]!)
  const step = contents.slice(taskAt).filter((c) => c.role === 'model').length
  const usage = { input: 50 + step, output: 20 + step }
  if (task.includes('TASK-WRITE')) {
    if (step === 0) return { text: 'Writing the file.', tools: [{ name: 'write_file', input: { file_path: '/data/hello.txt', content: 'hello from gemini\n' } }], usage }
    if (step === 1) return { tools: [{ name: 'run_shell_command', input: { command: 'cat hello.txt > ran.txt && echo ran', description: 'copy it' } }], usage }
    return { text: 'Wrote hello.txt and ran a command.', usage }
  }
  if (task.includes('TASK-FOLLOW')) {
    const remembered = contents.slice(0, taskAt).some((c) => JSON.stringify(c).includes('hello from gemini'))
    return { text: remembered ? 'I remember writing hello.txt.' : 'I remember nothing.', usage }
  }
  if (task.includes('TASK-SLOW')) {
    if (step === 0) return { tools: [{ name: 'run_shell_command', input: { command: `echo waiting; ${SLEEP}; echo woke`, description: 'wait' } }], usage }
    return { text: 'slept', usage }
  }
  if (task.includes('TASK-ERROR')) return { status: 400 }
  return { text: 'nothing scripted', usage }
}

// A CLI's start takes seconds on a loaded machine: generous time, never a timing assertion.
describe(`gemini-cli agent kind end to end (${AGENT_RUNTIME} runtime)`, { timeout: 180_000 }, () => {
  let stack: Stack
  let wsId: string
  let firstTask: string
  const { idleAfter, taskDone, followUp } = taskWaits(() => stack, () => wsId)

  beforeAll(async () => {
    stack = await startStack({
      runtime: AGENT_RUNTIME, model: script, modelApis: ['gemini'],
      provider: { name: 'fake-gemini', kind: 'gemini', default_model: 'gemini-test' },
      role: { name: 'gemini', agent_kind: 'gemini-cli', capabilities: CAPS },
      ...(AGENT_CLI_DIR ? { env: { CORRAL_AGENT_CLI_DIR: AGENT_CLI_DIR } } : {}),
    })
  }, 60_000)
  afterAll(() => stack?.close())

  it('runs Gemini CLI: it writes a file and runs a command; events in order; every request one allowed decision', async () => {
    const r = await stack.api('POST', '/tasks', { role_name: 'gemini', description: 'TASK-WRITE: write hello.txt, then copy it' })
    expect(r.status, JSON.stringify(r.body)).toBe(202)
    firstTask = r.body.task_id
    wsId = r.body.workspace_id
    const task = await taskDone(firstTask)
    expect(task, JSON.stringify(task) + stack.serve.output().slice(-3000)).toMatchObject({ status: 'completed', summary: 'Wrote hello.txt and ran a command.' })
    await idleAfter(wsId, 1)
    const files = (await stack.api('GET', `/workspaces/${wsId}/snapshot/files`)).body.entries.map((e: any) => e.path)
    expect(files).toEqual(expect.arrayContaining(['hello.txt', 'ran.txt']))

    const events = await stack.audit(wsId, 'actor=agent', `task_id=${firstTask}`)
    expect(events.map((e) => e.event_type)).toEqual([
      'session_start', 'task_start',
      'iteration_start', 'agent_response', 'tool_call', 'tool_result', 'file_change',
      'iteration_start', 'tool_call', 'tool_result', 'file_change',
      'iteration_start', 'agent_response', 'progress_status', 'task_end', 'session_end',
    ])
    const byType = (t: string) => events.filter((e) => e.event_type === t).map((e) => e.detail)
    expect(byType('session_start')[0]).toMatchObject({ agent_kind: 'gemini-cli', provider: 'gemini', model: 'gemini-test', resumed: false })
    expect(byType('tool_call').map((d) => d.tool)).toEqual(['write_file', 'run_shell_command'])
    expect(byType('file_change').map((d) => [d.path, d.action])).toEqual([['hello.txt', 'created'], ['ran.txt', 'created']])
    expect(byType('task_end')[0]).toMatchObject({ status: 'completed', iterations: 3 })

    const decisions = await stack.audit(wsId, 'event_type=policy_decision', `task_id=${firstTask}`)
    expect(decisions.filter((d) => !String(d.path).startsWith('/task/') && !String(d.path).startsWith('/v1beta/models/'))).toEqual([])
    const rows = decisions.filter((d) => String(d.path).startsWith('/v1beta/models/'))
    const served = stack.model!.requests.filter((q) => q.path.startsWith('/v1beta/models/')).length
    expect(rows.length).toBe(served)
    expect(rows.every((d) => d.decision === 'allow' && d.capability_name === 'model')).toBe(true)
    const streamed = rows.filter((d) => String(d.path).includes('streamGenerateContent'))
    expect(streamed.map((d) => d.debits.output_tokens)).toEqual([20, 21, 22])
  })

  it('a follow-up resumes the CLI session; a fresh-session follow-up starts a new one', async () => {
    const resumed = await followUp('TASK-FOLLOW: what did you write?')
    expect(await taskDone(resumed)).toMatchObject({ status: 'completed', summary: 'I remember writing hello.txt.' })
    await idleAfter(wsId, 2)
    const first = (await stack.audit(wsId, 'event_type=session_start', `task_id=${firstTask}`))[0].detail
    expect((await stack.audit(wsId, 'event_type=session_start', `task_id=${resumed}`))[0].detail).toMatchObject({ session_id: first.session_id, resumed: true })
    const fresh = await followUp('TASK-FOLLOW: fresh start', { reset_session: true })
    expect(await taskDone(fresh)).toMatchObject({ status: 'completed', summary: 'I remember nothing.' })
    await idleAfter(wsId, 3)
  })

  it('a model error fails the task with the CLI\'s exit and error', async () => {
    const done = await taskDone(await followUp('TASK-ERROR: this will fail'))
    expect(done, JSON.stringify(done)).toMatchObject({ status: 'failed', reason: 'model_error' })
    expect(done.summary).toMatch(/gemini-cli exited with code \d+: .*400/)
    await stack.until(async () => (await stack.api('GET', `/workspaces/${wsId}`)).body.state === 'idle', 'idle after the failed task', 60_000)
  })

  // Last in this workspace: Gemini CLI replays an interrupted turn when its session is resumed
  // (docs/agent.md "gemini-cli"), so a task after this one would first run the cancelled command again.
  it('cancel mid-task stops the CLI and what it started', async () => {
    const slow = await followUp('TASK-SLOW: wait a while')
    await stack.until(async () => hostRuns(SLEEP), 'the CLI to start its command', 60_000)
    expect((await stack.api('POST', `/tasks/${slow}/cancel`)).status).toBe(200)
    expect(await taskDone(slow)).toMatchObject({ status: 'cancelled', reason: 'cancelled_by_user' })
    await stack.until(async () => !hostRuns(SLEEP), 'the command to be gone', 30_000)
    await stack.until(async () => (await stack.api('GET', `/workspaces/${wsId}`)).body.state === 'idle', 'idle after cancel', 60_000)
  })

  it('a policy deny of the model call fails the task naming the deny', async () => {
    const caps = onLoopback(DENY_CAPS, portOf(stack.model!.url))
    const role = await stack.api('POST', '/agent-roles', { name: 'gemini-denied', agent_kind: 'gemini-cli', provider_id: stack.provider!.id, capabilities: caps })
    expect(role.status, JSON.stringify(role.body)).toBe(201)
    const r = await stack.api('POST', '/tasks', { role_name: 'gemini-denied', description: 'TASK-WRITE: denied' })
    const done = await taskDone(r.body.task_id)
    expect(done, JSON.stringify(done)).toMatchObject({ status: 'failed', reason: 'policy_denied' })
    expect(done.summary).toMatch(/denied by the proxy \(no_match\)/)
    const denies = await stack.audit(r.body.workspace_id, 'event_type=policy_decision', 'decision=deny')
    expect(denies.length).toBeGreaterThan(0)
    expect(denies.every((d) => d.reason === 'no_match' && d.method === 'POST')).toBe(true)
  })
})
