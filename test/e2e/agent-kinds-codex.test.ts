// Codex as a workspace agent, end to end: the built `corral serve`, the local (bubblewrap)
// runtime, the real Codex native binary from npm mounted read-only, every request through the
// policy proxy to the fake model's OpenAI Responses API (HTTPS on loopback) steered by the prompt
// (src/dev/cli-script.ts): Codex writes a file (its apply_patch) and runs a command. Codex speaks
// the Responses API over its WebSocket (as it does for OpenAI by default): the upgrade is decided
// by the policy, the credential injected into it, the usage in its `response.completed` messages
// metered, one row for the socket. Then a follow-up that resumes the Codex thread and a fresh one
// that does not, a cancel mid-command that leaves no process behind, a model error, a role whose
// policy denies the upgrade (Codex falls back to HTTPS), and a role whose policy denies both.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { cliScript } from '../../src/dev/index.js'
import { packageRoot } from '../../src/runtime/layout.js'
import { AGENT_RUNTIME, denyModelCaps, hostRuns, taskWaits } from '../helpers/agent-kinds.js'
import { onLoopback, portOf } from '../helpers/loopback-caps.js'
import { startStack, type Stack } from '../helpers/serve.js'

/** What the proxy injects; Codex holds only the adapter's placeholder. */
const KEY = 'sk-codex-e2e-4b1d7c'
// The example policy (examples/agents/codex.yaml) on the fake model: the Responses API both ways
// Codex speaks it, its WebSocket (the `responses-socket` rule) and HTTPS, the credential injected,
// output tokens metered from `response.completed` on either.
const CAPS = readFileSync(join(packageRoot(), 'examples/agents/codex.yaml'), 'utf8').replaceAll('[api.openai.com]', '["127.0.0.1"]')
/** The same without the socket rule: the upgrade is denied and Codex goes on over HTTPS. */
const HTTPS_ONLY_CAPS = CAPS.replace(/    - name: responses-socket\n(?:      .*\n)+/, '')
// Allows only a GET the CLI never makes: its upgrade and its POST /v1/responses are denied (no_match).
const DENY_CAPS = denyModelCaps('/v1/models')
/** A distinctive sleep, so the test finds it among the host's processes. */
const SLEEP = 'sleep 4717'

describe(`codex agent kind end to end (${AGENT_RUNTIME} runtime)`, { timeout: 180_000 }, () => {
  let stack: Stack
  let wsId: string
  let firstTask: string
  const { idleAfter, taskDone, followUp } = taskWaits(() => stack, () => wsId)

  beforeAll(async () => {
    stack = await startStack({
      runtime: AGENT_RUNTIME, model: cliScript(), modelApis: ['openai-responses'],
      provider: { name: 'fake-openai', kind: 'openai', base_url: '/v1', default_model: 'gpt-test' },
    })
    const cred = await stack.api('POST', '/credentials', { name: 'openai-key', provider: 'openai', kind: 'static_token', token: KEY })
    expect(cred.status, JSON.stringify(cred.body)).toBe(201)
    for (const [name, caps] of [['codex', CAPS], ['codex-https', HTTPS_ONLY_CAPS], ['codex-denied', DENY_CAPS]]) {
      const role = await stack.api('POST', '/agent-roles', { name, agent_kind: 'codex', provider_id: stack.provider!.id, capabilities: onLoopback(caps!, portOf(stack.model!.url)) })
      expect(role.status, JSON.stringify(role.body)).toBe(201)
    }
  }, 60_000)
  afterAll(() => stack?.close())

  it('runs Codex over its WebSocket: it writes a file and runs a command; events in order; one metered row for the socket', async () => {
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

    // Codex spoke over its WebSocket, through the proxy: every model turn a message on one socket,
    // the credential injected into the upgrade (Codex holds a placeholder).
    const turns = stack.model!.requests.filter((r) => JSON.stringify(r.body.input).includes('Greet the team'))
    expect(turns.map((r) => [r.api, r.transport])).toEqual(Array(3).fill(['openai-responses', 'websocket']))
    expect(new Set(turns.map((r) => r.headers.authorization))).toEqual(new Set([`Bearer ${KEY}`]))
    // One row for the socket Codex kept across the task's turns, allowed by the capability whose
    // socket rule matched; nothing else left the sandbox: no HTTPS fallback, no other destination.
    const decisions = await stack.audit(wsId, 'event_type=policy_decision', `task_id=${firstTask}`)
    const model = decisions.filter((d) => !String(d.path).startsWith('/task/'))
    expect(model.map((d) => [d.decision, d.policy_type, d.capability_name, d.method, d.path]), JSON.stringify(model)).toEqual([['allow', 'http', 'openai', 'GET', '/v1/responses']])
    const [row] = model
    // The 101, frames both ways (a warm-up and the three turns up, their events down), the usage of
    // its `response.completed` messages metered (the fake model's 60 + 40 + 30 output tokens), the
    // credential injected into the upgrade. Codex exits without a close frame (1006 on its leg).
    expect(row.detail).toMatchObject({ rule: 'responses-socket', upstream_status: 101, websocket: { closed_by: 'agent', to_upstream: { messages: 4 }, to_agent: { messages: expect.any(Number) } } })
    expect(row.detail.websocket.to_agent.messages).toBeGreaterThan(3 * 5)
    // The HTTPS stream's counter charges a socket nothing (its reservation returned); the socket's counts.
    expect(row.debits).toEqual({ output_tokens: 0, socket_output_tokens: 60 + 40 + 30 })
    expect(row.floored).toEqual({})
    expect(row.auth_used).toEqual(['openai-key'])
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
    await stack.until(async () => hostRuns(SLEEP), 'Codex to start its command', 60_000)
    const c = await stack.api('POST', `/tasks/${slow}/cancel`)
    expect(c.status, JSON.stringify(c.body)).toBe(200)
    expect(await taskDone(slow)).toMatchObject({ status: 'cancelled', reason: 'cancelled_by_user' })
    await stack.until(async () => !hostRuns(SLEEP), 'the command to be gone', 30_000)
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

  it('a policy without the socket rule: the upgrade is denied with a row and Codex goes on over HTTPS, each call allowed', async () => {
    const r = await stack.api('POST', '/tasks', { role_name: 'codex-https', description: 'fake:text over https' })
    expect(r.status).toBe(202)
    expect(await taskDone(r.body.task_id)).toMatchObject({ status: 'completed', summary: 'A text answer from the fake model (0 tool results before this prompt).' })
    const seen = stack.model!.requests.filter((q) => JSON.stringify(q.body.input).includes('fake:text over https'))
    expect(seen.map((q) => [q.transport, q.headers.authorization])).toEqual([['http', `Bearer ${KEY}`]])
    const rows = (await stack.audit(r.body.workspace_id, 'event_type=policy_decision')).filter((d) => !String(d.path).startsWith('/task/'))
    const denies = rows.filter((d) => d.decision === 'deny')
    expect(denies.length).toBeGreaterThan(0)
    for (const d of denies) {
      expect(d).toMatchObject({ method: 'GET', path: '/v1/responses', reason: 'no_match', detail: { allowrule_eval: [{ capability: 'openai', rule: 'responses', failed: 'method' }] } })
    }
    const allows = rows.filter((d) => d.decision === 'allow')
    expect(allows.map((d) => [d.capability_name, d.detail.rule, d.method, d.path, d.detail.upstream_status])).toEqual([['openai', 'responses', 'POST', '/v1/responses', 200]])
    // Metered from the stream's `response.completed` (30 tokens), floored at the example's failure_charge.
    expect(allows[0]).toMatchObject({ debits: { output_tokens: 64 }, floored: { output_tokens: 'extracted_below_failure_charge' } })
  })

  it('a policy deny of the model call fails the task naming the deny', async () => {
    const r = await stack.api('POST', '/tasks', { role_name: 'codex-denied', description: 'Greet the team' })
    expect(r.status).toBe(202)
    const done = await taskDone(r.body.task_id)
    expect(done, JSON.stringify(done)).toMatchObject({ status: 'failed', reason: 'policy_denied' })
    expect(done.summary).toMatch(/denied by the proxy \(no_match\)/)
    const denies = await stack.audit(r.body.workspace_id, 'event_type=policy_decision', 'decision=deny')
    expect(denies.length).toBeGreaterThan(0)
    // The upgrade first, then (Codex falling back) the HTTPS call: each denied with its row.
    expect(denies.map((d) => [d.reason, d.path])).toEqual(denies.map(() => ['no_match', '/v1/responses']))
    expect(new Set(denies.map((d) => d.method))).toEqual(new Set(['GET', 'POST']))
  })
})
