// The Gemini CLI adapter without a sandbox: its translator on recordings of the real CLI's
// stream-json (test/fixtures/agents: a task that writes a file and runs a command; a model call
// the proxy denied), and the argv, environment and settings it starts the CLI with.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { geminiCli, GEMINI_SETTINGS } from '../../../src/agent/kinds/gemini-cli/index.js'
import { outcome } from '../../../src/agent/kinds/index.js'

const FIXTURES = join(import.meta.dirname, '../../fixtures/agents')

function translate(file: string) {
  const t = geminiCli.translator({} as never)
  const events = readFileSync(join(FIXTURES, file), 'utf8').split('\n').flatMap((l) => t.line(l))
  return { t, events }
}

describe('gemini-cli translator', () => {
  it('turns the recorded stream into corral events: turns, tools, the final text and the usage', () => {
    const { t, events } = translate('gemini-cli-stream.jsonl')
    expect(events.map((e) => e.type)).toEqual([
      'iteration_start', 'agent_response', 'tool_call', 'tool_result',
      'iteration_start', 'tool_call', 'tool_result',
      'iteration_start', 'agent_response', 'progress_status',
    ])
    expect(events.filter((e) => e.type === 'tool_call').map((e) => [e.iteration, e.tool])).toEqual([[1, 'write_file'], [2, 'run_shell_command']])
    expect(events.find((e) => e.type === 'tool_call')!.input).toEqual({ file_path: '/data/hello.txt', content: 'hi\n' })
    expect(events.filter((e) => e.type === 'tool_result').map((e) => [e.tool, e.is_error, e.output])).toEqual([['write_file', false, ''], ['run_shell_command', false, 'hello.txt']])
    expect(events.filter((e) => e.type === 'agent_response').map((e) => e.text)).toEqual(['Writing.', 'All done.'])
    expect(t.sessionId()).toBe('788925e6-e0c7-40b6-ae80-b1c2bc1503fb')
    expect(t.iterations()).toBe(3)
    expect(t.usage()).toEqual({ input_tokens: 33, output_tokens: 15 })
    expect(t.result()).toEqual({ status: 'completed', summary: 'All done.' })
  })

  it('reads a failed result; a proxy deny in it is named as such', () => {
    const { t } = translate('gemini-cli-denied.jsonl')
    expect(t.result()?.status).toBe('failed')
    const [status, summary, reason] = outcome('gemini-cli', { code: 147, signal: null }, t.result(), [])
    expect([status, reason]).toEqual(['failed', 'policy_denied'])
    expect(summary).toMatch(/^The model call was denied by the proxy \(no_match\)/)
  })
})

describe('gemini-cli invocation', () => {
  it('points the CLI at the base URL, keeps its home under the state dir, quiets it, and resumes by id', () => {
    const ctx = {
      task: { id: 'task_1', description: '-p looks like a flag' }, cli: ['/usr/bin/node', '/run/corral/agent-cli/bundle/gemini.js'], workspaceDir: '/data',
      stateDir: '/data/.corral/gemini-cli', provider: 'gemini' as const, baseUrl: 'https://generativelanguage.googleapis.com', model: 'gemini-2.5-pro',
      session: { id: 'aaaaaaaa-0000-4000-8000-000000000000', resume: false }, env: { HTTPS_PROXY: 'http://corral:t@127.0.0.1:3128', CORRAL_MODEL_API_KEY: '' },
    }
    const inv = geminiCli.invocation(ctx)
    expect(inv.argv).toEqual([
      '/usr/bin/node', '/run/corral/agent-cli/bundle/gemini.js', '--prompt=-p looks like a flag', '--output-format', 'stream-json', '--approval-mode', 'yolo',
      '--skip-trust', '--model', 'gemini-2.5-pro', '--session-id', 'aaaaaaaa-0000-4000-8000-000000000000',
    ])
    expect(inv.env).toMatchObject({
      GOOGLE_GEMINI_BASE_URL: 'https://generativelanguage.googleapis.com', GEMINI_API_KEY: 'corral-proxy-injects-the-credential',
      GEMINI_CLI_HOME: '/data/.corral/gemini-cli/home', HTTPS_PROXY: 'http://corral:t@127.0.0.1:3128',
    })
    expect(JSON.parse(inv.files!['/data/.corral/gemini-cli/home/.gemini/settings.json']!)).toEqual(GEMINI_SETTINGS)
    expect(GEMINI_SETTINGS).toMatchObject({ privacy: { usageStatisticsEnabled: false }, telemetry: { enabled: false }, general: { disableAutoUpdate: true } })
    expect(geminiCli.invocation({ ...ctx, session: { ...ctx.session, resume: true } }).argv.slice(-2)).toEqual(['--resume', 'aaaaaaaa-0000-4000-8000-000000000000'])
  })
})
