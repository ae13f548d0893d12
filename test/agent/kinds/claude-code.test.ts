// The agent-kind runner and the Claude Code adapter without a sandbox: the translator on a
// recording of the real CLI's stream-json (test/fixtures/agents), the runner driving a stand-in CLI
// (fake-cli.mjs) through the adapter's argv and environment — session id then --resume, a reset
// starting a new session, file changes, a cancel that kills the CLI's children — and the failure
// reasons (exit code and last error line; a proxy deny named as such).
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { MemoryEventSink } from '../../../src/agent/index.js'
import { claudeCode } from '../../../src/agent/kinds/claude-code/index.js'
import { CliAgentRunner, outcome, policyDeny } from '../../../src/agent/kinds/index.js'
import { ListTaskSource } from '../../../src/agent/task-source.js'
import { DENY_MESSAGES } from '../../../src/contract/index.js'

const STREAM = join(import.meta.dirname, '../../fixtures/agents/claude-code-stream.jsonl')
const FAKE_CLI = join(import.meta.dirname, 'fake-cli.mjs')
const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})

function translate(lines: string[]) {
  const t = claudeCode.translator({} as never)
  const events = lines.flatMap((l) => t.line(l))
  return { t, events }
}

describe('claude-code translator', () => {
  it('turns the recorded stream into corral events, with the result\'s usage and the session id', () => {
    const { t, events } = translate(readFileSync(STREAM, 'utf8').split('\n'))
    expect(events.map((e) => e.type)).toEqual([
      'iteration_start', 'agent_response', 'progress_status', 'tool_call', 'tool_result',
      'iteration_start', 'tool_call', 'progress_status', 'tool_result',
      'iteration_start', 'agent_response', 'progress_status',
    ])
    expect(events.filter((e) => e.type === 'tool_call').map((e) => [e.iteration, e.tool, e.tool_use_id])).toEqual([[1, 'Write', 'toolu_0_0'], [2, 'Bash', 'toolu_1_0']])
    expect(events.find((e) => e.type === 'tool_result')).toMatchObject({ iteration: 1, tool: 'Write', tool_use_id: 'toolu_0_0', is_error: false, truncated: false })
    expect(t.sessionId()).toBe('11111111-2222-4333-8444-555555555555')
    expect(t.iterations()).toBe(3)
    expect(t.usage()).toEqual({ input_tokens: 60, output_tokens: 13 })
    expect(t.result()).toEqual({ status: 'completed', summary: 'All done.' })
  })

  it('cuts long tool inputs and outputs like the reference agent, and ignores lines that are not JSON', () => {
    const long = 'x'.repeat(5000)
    const { events } = translate([
      'not json at all',
      JSON.stringify({ type: 'assistant', message: { id: 'm1', content: [{ type: 'tool_use', id: 't1', name: 'Write', input: { file_path: 'a', content: long } }] } }),
      JSON.stringify({ type: 'user', message: { content: [{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'text', text: long }], is_error: true }] } }),
    ])
    const call = events.find((e) => e.type === 'tool_call')!
    expect(((call.input as Record<string, string>).content)).toHaveLength(2001)
    expect(events.find((e) => e.type === 'tool_result')).toMatchObject({ is_error: true, truncated: true, output: 'x'.repeat(2000) })
  })

  it('reads a failed result: the API status and the CLI\'s message', () => {
    const { t } = translate([JSON.stringify({ type: 'result', subtype: 'success', is_error: true, api_error_status: 404, result: 'There is an issue with the selected model.' })])
    expect(t.result()).toEqual({ status: 'failed', summary: 'There is an issue with the selected model.', error: 'API error 404: There is an issue with the selected model.' })
  })
})

describe('failure reasons', () => {
  it('names a proxy deny from its message or its JSON body', () => {
    expect(policyDeny(`API Error: 403 ${DENY_MESSAGES.no_match}`)).toEqual({ reason: 'no_match', message: DENY_MESSAGES.no_match })
    expect(policyDeny('403 {"error":{"code":"policy_denied","reason":"budget_exhausted"}}')?.reason).toBe('budget_exhausted')
    expect(policyDeny('API Error: 403 Forbidden')).toBeUndefined()
    const [status, summary, reason] = outcome('claude-code', { code: 1, signal: null }, { status: 'failed', summary: 'x', error: `API error 403: ${DENY_MESSAGES.no_match}` }, [])
    expect([status, reason]).toEqual(['failed', 'policy_denied'])
    expect(summary).toBe(`The model call was denied by the proxy (no_match): ${DENY_MESSAGES.no_match}`)
  })

  it('gives the exit code and the last error line; a model API error is model_error', () => {
    expect(outcome('gemini-cli', { code: 3, signal: null }, undefined, ['starting', 'fatal: something broke'])).toEqual(['failed', 'gemini-cli exited with code 3: fatal: something broke', 'agent_error'])
    expect(outcome('claude-code', { code: 1, signal: null }, { status: 'failed', summary: 'bad', error: 'API error 500: overloaded' }, [])).toEqual(['failed', 'claude-code exited with code 1: API error 500: overloaded', 'model_error'])
    expect(outcome('claude-code', { code: 0, signal: null }, undefined, [])).toEqual(['failed', 'claude-code exited with code 0: it reported no result', 'agent_error'])
    expect(outcome('claude-code', { code: null, signal: 'SIGKILL' }, undefined, [])[1]).toBe('claude-code was killed by SIGKILL: no error output')
    expect(outcome('claude-code', { code: 0, signal: null }, { status: 'completed', summary: 'ok' }, [])).toEqual(['completed', 'ok'])
  })
})

describe('agent-kind runner (stand-in CLI)', () => {
  const setup = (mode: string) => {
    const root = mkdtempSync(join(tmpdir(), 'corral-kinds-'))
    dirs.push(root)
    const log = join(root, 'argv.ndjson')
    const sink = new MemoryEventSink()
    const runner = new CliAgentRunner({
      adapter: claudeCode, cli: [process.execPath, FAKE_CLI], workspaceDir: join(root, 'data'), provider: 'anthropic',
      baseUrl: 'https://api.anthropic.com', model: 'claude-test', sink, killGraceMs: 500,
      env: { PATH: process.env.PATH, FAKE_LOG: log, FAKE_MODE: mode, FAKE_STREAM: STREAM, FAKE_PID: join(root, 'pid') },
    })
    return { root, log, sink, runner, calls: () => readFileSync(log, 'utf8').trim().split('\n').map((l) => JSON.parse(l)) }
  }

  it('starts a session under its own id, resumes it on the next task, and starts anew on reset_session', async () => {
    const { root, sink, runner, calls } = setup('replay')
    mkdirSync(join(root, 'data'), { recursive: true })
    const outcomes = await runner.runSession(new ListTaskSource([
      { id: 'task_1', description: 'write hello' },
      { id: 'task_2', description: 'follow up' },
      { id: 'task_3', description: 'fresh', reset_session: true },
    ]))
    expect(outcomes.map((o) => [o.status, o.summary])).toEqual([['completed', 'All done.'], ['completed', 'All done.'], ['completed', 'All done.']])
    const [first, second, third] = calls()
    // The recording reports its own session id, which the runner keeps from then on.
    expect(first.argv).toEqual(['-p', '--output-format', 'stream-json', '--verbose', '--model', 'claude-test', '--dangerously-skip-permissions', '--session-id', expect.stringMatching(/^[0-9a-f-]{36}$/)])
    expect(second.argv.slice(-2)).toEqual(['--resume', '11111111-2222-4333-8444-555555555555'])
    expect(third.argv.at(-2)).toBe('--session-id')
    expect(third.argv.at(-1)).not.toBe(first.argv.at(-1))
    expect(first).toMatchObject({ stdin: 'write hello', home: join(root, 'data', '.corral', 'claude-code', 'home'), base: 'https://api.anthropic.com', quiet: '1' })

    const byTask = (id: string) => sink.events.filter((e) => e.task_id === id).map((e) => e.type)
    expect(byTask('task_1')).toEqual([
      'session_start', 'task_start', 'iteration_start', 'agent_response', 'progress_status', 'tool_call', 'tool_result', 'file_change',
      'iteration_start', 'tool_call', 'progress_status', 'tool_result', 'iteration_start', 'agent_response', 'progress_status', 'task_end',
    ])
    expect(byTask('task_2')[0]).toBe('task_start')
    expect(sink.events.find((e) => e.type === 'file_change')).toMatchObject({ task_id: 'task_1', iteration: 1, path: 'hello.txt', action: 'created', size: 3 })
    expect(sink.events.filter((e) => e.type === 'session_start').map((e) => [e.resumed, e.reset])).toEqual([[false, false], [false, true]])
    expect(sink.events.find((e) => e.type === 'task_end')).toMatchObject({ status: 'completed', iterations: 3, usage: { input_tokens: 60, output_tokens: 13 } })
    expect(JSON.parse(readFileSync(join(root, 'data', '.corral', 'claude-code-session.json'), 'utf8')).session_id).toBe('11111111-2222-4333-8444-555555555555')
  })

  it('a saved session is resumed by a new agent process', async () => {
    const { root, runner, calls } = setup('replay')
    mkdirSync(join(root, 'data', '.corral'), { recursive: true })
    writeFileSync(join(root, 'data', '.corral', 'claude-code-session.json'), '{"session_id":"aaaaaaaa-0000-4000-8000-000000000000"}\n')
    await runner.runSession(new ListTaskSource([{ id: 'task_1', description: 'again' }]))
    expect(calls()[0].argv.slice(-2)).toEqual(['--resume', 'aaaaaaaa-0000-4000-8000-000000000000'])
  })

  it('fails with the exit code and the last error line', async () => {
    const { root, runner } = setup('fail')
    mkdirSync(join(root, 'data'), { recursive: true })
    const [o] = await runner.runSession(new ListTaskSource([{ id: 'task_1', description: 'x' }]))
    expect(o).toMatchObject({ status: 'failed', reason: 'agent_error', summary: 'claude-code exited with code 3: fatal: something broke' })
  })

  it('cancel stops the CLI and the processes it started, and ends the task interrupted', async () => {
    const { root, sink, runner } = setup('hang')
    mkdirSync(join(root, 'data'), { recursive: true })
    const controller = new AbortController()
    const running = runner.runSession(new ListTaskSource([{ id: 'task_1', description: 'x' }]), controller.signal)
    const pidFile = join(root, 'pid')
    for (let i = 0; i < 100 && !existsSync(pidFile); i++) await new Promise((r) => setTimeout(r, 50))
    const pid = Number(readFileSync(pidFile, 'utf8'))
    expect(alive(pid)).toBe(true)
    controller.abort()
    const [o] = await running
    expect(o).toMatchObject({ status: 'failed', reason: 'interrupted' })
    expect(sink.events.at(-2)).toMatchObject({ type: 'task_end', status: 'failed', reason: 'interrupted' })
    for (let i = 0; i < 100 && alive(pid); i++) await new Promise((r) => setTimeout(r, 50))
    expect(alive(pid)).toBe(false)
  })
})

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}
