// Codex as a workspace agent, end to end: the built `corral serve`, the local (bubblewrap)
// runtime, the real Codex native binary from npm mounted read-only, every request through the
// policy proxy to the fake model's OpenAI Responses API (HTTPS on loopback) steered by the prompt
// (src/dev/cli-script.ts): Codex writes a file (its apply_patch) and runs a command. Then a
// follow-up that resumes the Codex thread and a fresh one that does not, a cancel mid-command that
// leaves no process behind, a model error, and a role whose policy denies the model call.
import { execFileSync } from 'node:child_process'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { cliScript, modelPolicy } from '../../src/dev/index.js'
import { onLoopback, portOf } from '../helpers/loopback-caps.js'
import { startStack, type Stack } from '../helpers/serve.js'
import { bwrapAvailable } from '../runtime/helpers.js'

const RUNTIME = (await bwrapAvailable()) ? 'local' : 'process'
const CAPS = modelPolicy({ domain: '127.0.0.1', identity: true, paths: ['/v1/responses'], requests: { workspaceMax: 1000 } })
// Allows only a GET the CLI never makes: its POST /v1/responses is denied (no_match).
const DENY_CAPS = `- name: model
  type: http
  allow:
    - name: models
      domains: ["127.0.0.1"]
      methods: [GET]
      paths: [/v1/models]
`
/** A distinctive sleep, so the test finds it among the host's processes. */
const SLEEP = 'sleep 4717'

function hostHasSleep(): boolean {
  try {
    return execFileSync('pgrep', ['-f', `^${SLEEP}$`], { encoding: 'utf8' }).trim() !== ''
  } catch {
    return false
  }
}

describe(`codex agent kind end to end (${RUNTIME} runtime)`, { timeout: 180_000 }, () => {
  let stack: Stack
  let wsId: string
  let firstTask: string
  const idleAfter = (id: string, count: number) => stack.until(async () => {
    const w = (await stack.api('GET', `/workspaces/${id}`)).body
    return w.state === 'idle' && w.task_count === count && w
  }, `workspace ${id} idle after ${count} tasks`, 60_000)
  // A CLI's start on a loaded machine can take long: wait for a task well past the default.
  const taskDone = (id: string) => stack.until(async () => {
    const t = (await stack.api('GET', `/tasks/${id}`)).body
    return ['completed', 'failed', 'cancelled'].includes(t.status) && t
  }, `task ${id}`, 120_000)
  const followUp = async (description: string, extra: Record<string, unknown> = {}): Promise<string> => {
    const r = await stack.api('POST', `/workspaces/${wsId}/tasks`, { description, ...extra })
    expect(r.status, JSON.stringify(r.body)).toBe(202)
    return r.body.task_id
  }

  beforeAll(async () => {
    stack = await startStack({
      runtime: RUNTIME, model: cliScript(), modelApis: ['openai-responses'],
      provider: { name: 'fake-openai', kind: 'openai', base_url: '/v1', default_model: 'gpt-test' },
      role: { name: 'codex', agent_kind: 'codex', capabilities: CAPS },
    })
  }, 60_000)
  afterAll(() => stack?.close())

  it('runs Codex: it writes a file and runs a command; events in order; one allowed decision per model request', async () => {
    const submitted = await stack.corral(['task', 'submit', '--role', 'codex', 'Greet the team', '--wait', '--json'])
    expect(submitted.code, submitted.stderr + stack.serve.output().slice(-3000)).toBe(0)
    const docs = submitted.stdout.trim().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l))
    firstTask = docs[0].task_id
    wsId = docs[0].workspace_id
    const task = await taskDone(firstTask)
    expect(task, JSON.stringify(task)).toMatchObject({ status: 'completed', summary: 'Done: wrote hello.md and ran a command. Tool results before this prompt: 0.' })
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
    expect(byType('session_start')[0]).toMatchObject({ agent_kind: 'codex', provider: 'openai', model: 'gpt-test', resumed: false })
    expect(byType('tool_call').map((d) => d.tool)).toEqual(['apply_patch', 'command_execution'])
    expect(byType('tool_call')[1].input.command).toContain('ls && wc -w hello.md')
    expect(byType('tool_result').map((d) => d.is_error)).toEqual([false, false])
    expect(byType('tool_result')[1].output).toMatch(/\d+ hello\.md/)
    expect(byType('file_change').map((d) => [d.path, d.action])).toEqual([['hello.md', 'created']])
    expect(byType('task_end')[0]).toMatchObject({ status: 'completed', iterations: 3, usage: { input_tokens: 1200 + 1400 + 1500, output_tokens: 60 + 40 + 30 } })

    // Every request Codex made is one decision row; nothing but the model call left the sandbox.
    const decisions = await stack.audit(wsId, 'event_type=policy_decision', `task_id=${firstTask}`)
    expect(stack.model!.requests.map((r) => [r.api, r.transport])).toEqual(Array(3).fill(['openai-responses', 'http']))
    expect(decisions.filter((d) => !String(d.path).startsWith('/task/') && d.path !== '/v1/responses')).toEqual([])
    expect(decisions.filter((d) => d.path === '/v1/responses').map((d) => [d.decision, d.capability_name, d.method])).toEqual(Array(3).fill(['allow', 'model', 'POST']))
  })

  it('a follow-up resumes the Codex thread (the model sees the earlier tool results); a fresh-session follow-up starts a new one', async () => {
    const resumed = await followUp('fake:text what did you do?')
    expect(await taskDone(resumed)).toMatchObject({ status: 'completed', summary: 'A text answer from the fake model (2 tool results before this prompt).' })
    await idleAfter(wsId, 2)
    // Codex names its thread itself (thread.started), after the first task's session_start: the
    // follow-up resumes that thread, the one the model was talking in.
    const again = (await stack.audit(wsId, 'event_type=session_start', `task_id=${resumed}`))[0].detail
    const thread = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/
    expect(again).toMatchObject({ session_id: expect.stringMatching(thread), resumed: true })
    // Codex reports a thread's running totals; the task's own usage is what this turn added.
    expect((await stack.audit(wsId, 'event_type=task_end', `task_id=${resumed}`))[0].detail.usage).toEqual({ input_tokens: 1500, output_tokens: 30 })

    const fresh = await followUp('fake:text fresh start', { reset_session: true })
    expect(await taskDone(fresh)).toMatchObject({ status: 'completed', summary: 'A text answer from the fake model (0 tool results before this prompt).' })
    await idleAfter(wsId, 3)
    const freshStart = (await stack.audit(wsId, 'event_type=session_start', `task_id=${fresh}`))[0].detail
    expect(freshStart).toMatchObject({ resumed: false, reset: true })
    expect(freshStart.session_id).not.toBe(again.session_id)
  })

  it('cancel mid-command stops Codex and what it started', async () => {
    const slow = await followUp(`wait a while fake:${SLEEP.replace(' ', '-')}`)
    await stack.until(async () => hostHasSleep(), 'Codex to start its command', 60_000)
    const c = await stack.api('POST', `/tasks/${slow}/cancel`)
    expect(c.status, JSON.stringify(c.body)).toBe(200)
    expect(await taskDone(slow)).toMatchObject({ status: 'cancelled', reason: 'cancelled_by_user' })
    await stack.until(async () => !hostHasSleep(), 'the command to be gone', 30_000)
    await stack.until(async () => (await stack.api('GET', `/workspaces/${wsId}`)).body.state === 'idle', 'idle after cancel', 60_000)
  })

  it('a model error (500 on every try) fails the task with Codex\'s exit and error', async () => {
    const bad = await followUp('this will fail fake:500')
    const done = await taskDone(bad)
    expect(done, JSON.stringify(done)).toMatchObject({ status: 'failed' })
    expect(['model_error', 'agent_error']).toContain(done.reason)
    // Codex words every 5xx as its own "high demand" line, after its one retry.
    expect(done.summary).toMatch(/^codex exited with code 1: We.re currently experiencing high demand/)
    // It retried (config.toml: one request retry, one stream retry) before giving up.
    expect(stack.model!.requests.filter((r) => JSON.stringify(r.body.input).includes('this will fail')).length).toBeGreaterThanOrEqual(2)
    await stack.until(async () => (await stack.api('GET', `/workspaces/${wsId}`)).body.state === 'idle', 'idle after the failure', 60_000)
  })

  it('a 429 with Retry-After is retried by Codex and the task completes', async () => {
    const before = stack.model!.requests.length
    const limited = await followUp('rate limited once fake:429-once')
    expect(await taskDone(limited)).toMatchObject({ status: 'completed' })
    expect(stack.model!.requests.length - before).toBe(4)
  })

  it('a policy deny of the model call fails the task naming the deny', async () => {
    const caps = onLoopback(DENY_CAPS, portOf(stack.model!.url))
    const role = await stack.api('POST', '/agent-roles', { name: 'codex-denied', agent_kind: 'codex', provider_id: stack.provider!.id, capabilities: caps })
    expect(role.status, JSON.stringify(role.body)).toBe(201)
    const r = await stack.api('POST', '/tasks', { role_name: 'codex-denied', description: 'Greet the team' })
    expect(r.status).toBe(202)
    const done = await taskDone(r.body.task_id)
    expect(done, JSON.stringify(done)).toMatchObject({ status: 'failed', reason: 'policy_denied' })
    expect(done.summary).toMatch(/denied by the proxy \(no_match\)/)
    const denies = await stack.audit(r.body.workspace_id, 'event_type=policy_decision', 'decision=deny')
    expect(denies.length).toBeGreaterThan(0)
    expect(denies.map((d) => [d.reason, d.method, d.path])).toEqual(denies.map(() => ['no_match', 'POST', '/v1/responses']))
  })
})
