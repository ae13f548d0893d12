// Claude Code as a workspace agent, end to end: the built `corral serve`, the local (bubblewrap)
// runtime, the real Claude Code native binary from npm mounted read-only, every request through
// the policy proxy to the fake Anthropic API (HTTPS on loopback) scripted to make the CLI write a
// file and run a command. Then a follow-up that resumes the CLI's session, a cancel mid-task that
// leaves no process behind, a model error, and a role whose policy denies the model call.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { modelPolicy } from '../../src/dev/index.js'
import { AGENT_CLI_DIR, AGENT_RUNTIME, denyModelCaps, hostRuns, taskWaits } from '../helpers/agent-kinds.js'
import { onLoopback, portOf } from '../helpers/loopback-caps.js'
import { startStack, type Stack } from '../helpers/serve.js'

const CAPS = modelPolicy({ domain: '127.0.0.1', identity: true, outputTokens: { reserve: 100, failureCharge: 10, workspaceMax: 100_000, taskMax: 50_000 } })
// Allows only a GET the CLI never makes: its POST /v1/messages is denied (no_match).
const DENY_CAPS = denyModelCaps('/v1/models')
/** A distinctive sleep, so the test can find it among the host's processes. */
const SLEEP = 'sleep 4242'
// Claude Code refuses a standalone sleep as a tool call; one inside a longer command runs.
const SLOW_COMMAND = `echo waiting; ${SLEEP}; echo woke`

type Msg = { role: string; content: string | Array<{ type: string; text?: string }> }
const textOf = (m: Msg): string => (typeof m.content === 'string' ? m.content : m.content.map((b) => (b.type === 'text' ? b.text ?? '' : '')).join(''))
const isToolResults = (m: Msg): boolean => Array.isArray(m.content) && m.content.some((b) => b.type === 'tool_result')

/** The model's side: the task is the last user message with text; the step is how many turns it has had. */
function script(body: any) {
  const messages: Msg[] = body.messages ?? []
  const taskAt = messages.findLastIndex((m) => m.role === 'user' && !isToolResults(m))
  const task = textOf(messages[taskAt]!)
  const step = messages.slice(taskAt).filter((m) => m.role === 'assistant').length
  const usage = { input: 40 + step, output: 20 + step }
  if (task.includes('TASK-WRITE')) {
    if (step === 0) return { text: 'Writing the file.', tools: [{ name: 'Write', input: { file_path: '/data/hello.txt', content: 'hello from claude\n' } }], stop: 'tool_use' as const, usage }
    if (step === 1) return { tools: [{ name: 'Bash', input: { command: 'cat hello.txt > ran.txt && echo ran', description: 'copy it' } }], stop: 'tool_use' as const, usage }
    return { text: 'Wrote hello.txt and ran a command.', usage }
  }
  if (task.includes('TASK-FOLLOW')) {
    const remembered = messages.slice(0, taskAt).some((m) => JSON.stringify(m.content).includes('hello from claude'))
    return { text: remembered ? 'I remember writing hello.txt.' : 'I remember nothing.', usage }
  }
  if (task.includes('TASK-SLOW')) {
    if (step === 0) return { tools: [{ name: 'Bash', input: { command: SLOW_COMMAND, description: 'wait', timeout: 600000 } }], stop: 'tool_use' as const, usage }
    return { text: 'slept', usage }
  }
  if (task.includes('TASK-ERROR')) return { status: 400, errorBody: { type: 'error', error: { type: 'invalid_request_error', message: 'scripted model failure' } } }
  return { text: 'nothing scripted', usage }
}

// A CLI's start takes seconds on a loaded machine: generous time, never a timing assertion.
describe(`claude-code agent kind end to end (${AGENT_RUNTIME} runtime)`, { timeout: 180_000 }, () => {
  let stack: Stack
  let wsId: string
  let firstTask: string
  const { idleAfter, taskDone, followUp } = taskWaits(() => stack, () => wsId)

  beforeAll(async () => {
    stack = await startStack({
      runtime: AGENT_RUNTIME, model: script, role: { name: 'claude', agent_kind: 'claude-code', capabilities: CAPS },
      ...(AGENT_CLI_DIR ? { env: { CORRAL_AGENT_CLI_DIR: AGENT_CLI_DIR } } : {}),
    })
  }, 60_000)
  afterAll(() => stack?.close())

  it('runs Claude Code: it writes a file and runs a command; events in order; one allowed decision per model request', async () => {
    const submitted = await stack.corral(['task', 'submit', '--role', 'claude', 'TASK-WRITE: write hello.txt, then copy it', '--wait', '--json'])
    expect(submitted.code, submitted.stderr + stack.serve.output().slice(-3000)).toBe(0)
    // --wait --json: the accepted task, then the finished one.
    const docs = submitted.stdout.trim().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l))
    firstTask = docs[0].task_id
    wsId = docs[0].workspace_id
    const task = await taskDone(firstTask)
    expect(task, JSON.stringify(task)).toMatchObject({ status: 'completed', summary: 'Wrote hello.txt and ran a command.' })
    await idleAfter(wsId, 1)

    const files = (await stack.api('GET', `/workspaces/${wsId}/snapshot/files`)).body.entries.map((e: any) => e.path)
    expect(files).toEqual(expect.arrayContaining(['hello.txt', 'ran.txt']))

    const events = await stack.audit(wsId, 'actor=agent', `task_id=${firstTask}`)
    const types = events.map((e) => e.event_type).filter((t) => t !== 'progress_status')
    expect(types).toEqual([
      'session_start', 'task_start',
      'iteration_start', 'agent_response', 'tool_call', 'tool_result', 'file_change',
      'iteration_start', 'tool_call', 'tool_result', 'file_change',
      'iteration_start', 'agent_response', 'task_end', 'session_end',
    ])
    const byType = (t: string) => events.filter((e) => e.event_type === t).map((e) => e.detail)
    expect(byType('session_start')[0]).toMatchObject({ agent_kind: 'claude-code', provider: 'anthropic', model: 'claude-test', resumed: false })
    expect(byType('tool_call').map((d) => d.tool)).toEqual(['Write', 'Bash'])
    expect(byType('tool_call')[1].input).toMatchObject({ command: 'cat hello.txt > ran.txt && echo ran' })
    expect(byType('tool_result').map((d) => d.is_error)).toEqual([false, false])
    expect(byType('tool_result')[1].output).toContain('ran')
    expect(byType('file_change').map((d) => [d.path, d.action])).toEqual([['hello.txt', 'created'], ['ran.txt', 'created']])
    expect(byType('task_end')[0]).toMatchObject({ status: 'completed', iterations: 3, usage: { input_tokens: 40 + 41 + 42, output_tokens: 20 + 21 + 22 } })

    // Every request the CLI made is one decision row, allowed, metered from the stream.
    const decisions = await stack.audit(wsId, 'event_type=policy_decision', `task_id=${firstTask}`)
    const modelRequests = stack.model!.requests.filter((r) => r.path.startsWith('/v1/messages')).length
    expect(modelRequests).toBe(3)
    // Nothing else left the sandbox: the non-essential traffic is switched off (docs/agent.md).
    expect(decisions.filter((d) => !String(d.path).startsWith('/task/') && d.path !== '/v1/messages')).toEqual([])
    const rows = decisions.filter((d) => d.path === '/v1/messages')
    expect(rows.map((d) => [d.decision, d.capability_name, d.method])).toEqual(Array(3).fill(['allow', 'model', 'POST']))
    expect(rows.map((d) => d.debits.output_tokens)).toEqual([20, 21, 22])
  })

  it('a follow-up resumes the CLI session; a fresh-session follow-up starts a new one', async () => {
    const resumed = await followUp('TASK-FOLLOW: what did you write?')
    expect(await taskDone(resumed)).toMatchObject({ status: 'completed', summary: 'I remember writing hello.txt.' })
    await idleAfter(wsId, 2)
    const first = (await stack.audit(wsId, 'event_type=session_start', `task_id=${firstTask}`))[0].detail
    const again = (await stack.audit(wsId, 'event_type=session_start', `task_id=${resumed}`))[0].detail
    expect(again).toMatchObject({ session_id: first.session_id, resumed: true })

    const r = await stack.api('POST', `/workspaces/${wsId}/tasks`, { description: 'TASK-FOLLOW: fresh start', reset_session: true })
    expect(r.status).toBe(202)
    expect(await taskDone(r.body.task_id)).toMatchObject({ status: 'completed', summary: 'I remember nothing.' })
    await idleAfter(wsId, 3)
    const fresh = (await stack.audit(wsId, 'event_type=session_start', `task_id=${r.body.task_id}`))[0].detail
    expect(fresh).toMatchObject({ resumed: false, reset: true })
    expect(fresh.session_id).not.toBe(first.session_id)
  })

  it('cancel mid-task stops the CLI and what it started', async () => {
    const slow = await followUp('TASK-SLOW: wait a while')
    await stack.until(async () => hostRuns(SLEEP), 'the CLI to start its command', 60_000)
    const c = await stack.api('POST', `/tasks/${slow}/cancel`)
    expect(c.status, JSON.stringify(c.body)).toBe(200)
    expect(await taskDone(slow)).toMatchObject({ status: 'cancelled', reason: 'cancelled_by_user' })
    await stack.until(async () => !hostRuns(SLEEP), 'the command to be gone', 30_000)
    await stack.until(async () => (await stack.api('GET', `/workspaces/${wsId}`)).body.state === 'idle', 'idle after cancel', 60_000)
  })

  it('a model error fails the task with the CLI\'s exit and error', async () => {
    const bad = await followUp('TASK-ERROR: this will fail')
    const done = await taskDone(bad)
    expect(done, JSON.stringify(done)).toMatchObject({ status: 'failed' })
    expect(['model_error', 'agent_error']).toContain(done.reason)
    expect(done.summary).toMatch(/400/)
    expect(done.summary).toMatch(/scripted model failure/)
  })

  it('a policy deny of the model call fails the task naming the deny', async () => {
    const caps = onLoopback(DENY_CAPS, portOf(stack.model!.url))
    const role = await stack.api('POST', '/agent-roles', { name: 'claude-denied', agent_kind: 'claude-code', provider_id: stack.provider!.id, capabilities: caps })
    expect(role.status, JSON.stringify(role.body)).toBe(201)
    const r = await stack.api('POST', '/tasks', { role_name: 'claude-denied', description: 'TASK-WRITE: denied' })
    expect(r.status).toBe(202)
    const done = await taskDone(r.body.task_id)
    expect(done, JSON.stringify(done)).toMatchObject({ status: 'failed', reason: 'policy_denied' })
    expect(done.summary).toMatch(/denied by the proxy \(no_match\)/)
    const denies = await stack.audit(r.body.workspace_id, 'event_type=policy_decision', 'decision=deny')
    expect(denies.length).toBeGreaterThan(0)
    expect(denies.map((d) => [d.reason, d.method, d.path])).toEqual(denies.map(() => ['no_match', 'POST', '/v1/messages']))
    const end = (await stack.audit(r.body.workspace_id, 'event_type=task_end'))[0].detail
    expect(end).toMatchObject({ status: 'failed', reason: 'policy_denied' })
  })
})
