// The Codex adapter without a sandbox: its translator on recordings of the real CLI's `exec --json`
// against the fake model (test/fixtures/agents: a task that writes a file with apply_patch and runs
// a command; a model call refused with a 400), its usage per task from the thread's running
// totals, and the argv, environment and config.toml it starts the CLI with.
import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { codex } from '../../../src/agent/kinds/codex/index.js'
import { outcome } from '../../../src/agent/kinds/index.js'

const FIXTURES = join(import.meta.dirname, '../../fixtures/agents')

function translate(file: string, stateDir = mkdtempSync(join(tmpdir(), 'codex-state-'))) {
  const t = codex.translator({ stateDir } as never)
  const events = readFileSync(join(FIXTURES, file), 'utf8').split('\n').flatMap((l) => t.line(l))
  return { t, events, stateDir }
}

describe('codex translator', () => {
  it('turns the recorded JSONL into corral events: turns, the patch and the command as tools, the final text, the usage', () => {
    const { t, events } = translate('codex-exec.jsonl')
    expect(events.map((e) => e.type)).toEqual([
      'iteration_start', 'agent_response', 'tool_call', 'tool_result',
      'iteration_start', 'agent_response', 'tool_call', 'tool_result',
      'iteration_start', 'agent_response', 'progress_status',
    ])
    const calls = events.filter((e) => e.type === 'tool_call')
    expect(calls.map((e) => [e.iteration, e.tool])).toEqual([[1, 'apply_patch'], [2, 'command_execution']])
    expect(calls[0]!.input).toEqual({ changes: [{ path: '/data/hello.md', kind: 'add' }] })
    const results = events.filter((e) => e.type === 'tool_result')
    expect(results.map((e) => [e.tool, e.is_error])).toEqual([['apply_patch', false], ['command_execution', false]])
    expect(results[1]!.output).toMatch(/hello\.md\n\d+ hello\.md/)
    expect(t.sessionId()).toMatch(/^[0-9a-f]{8}-/)
    expect(t.iterations()).toBe(3)
    expect(t.usage()).toEqual({ input_tokens: 4100, output_tokens: 130 })
    expect(t.result()).toEqual({ status: 'completed', summary: 'Done: wrote hello.md and ran a command. Tool results before this prompt: 0.' })
  })

  it('a resumed thread\'s usage is what the task added to the running totals', () => {
    const { stateDir } = translate('codex-exec.jsonl')
    const again = codex.translator({ stateDir } as never)
    const thread = JSON.parse(readFileSync(join(FIXTURES, 'codex-exec.jsonl'), 'utf8').split('\n')[0]!).thread_id
    again.line(JSON.stringify({ type: 'thread.started', thread_id: thread }))
    again.line(JSON.stringify({ type: 'turn.completed', usage: { input_tokens: 5600, output_tokens: 160 } }))
    expect(again.usage()).toEqual({ input_tokens: 1500, output_tokens: 30 })
  })

  it('a failed turn is the task\'s failure with the API\'s message; the warning before it is not', () => {
    const { t } = translate('codex-failed.jsonl')
    expect(t.result()?.status).toBe('failed')
    const [status, summary] = outcome('codex', { code: 1, signal: null }, t.result(), [])
    expect(status).toBe('failed')
    expect(summary).toMatch(/^codex exited with code 1: .*Invalid request \(scripted by the fake model\)/)
  })

  it('starts `codex exec --json` with the task on stdin, `exec resume <id>` for a follow-up, its config in its own home', () => {
    const ctx = {
      task: { description: 'do it' }, cli: ['/cli/codex'], workspaceDir: '/data', stateDir: '/data/.corral/codex', provider: 'openai', baseUrl: 'https://api.example/v1/', model: 'gpt-x',
      session: { id: 'thread-1', resume: false }, env: { HTTPS_PROXY: 'http://corral:t@127.0.0.1:3128', SSL_CERT_FILE: '/etc/corral/bundle.pem', CORRAL_MODEL_API_KEY: '' },
    } as never
    const fresh = codex.invocation(ctx)
    expect(fresh.argv).toEqual(['/cli/codex', 'exec', '--json', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox', '--model', 'gpt-x', '-'])
    expect(fresh.stdin).toBe('do it')
    expect(fresh.env).toMatchObject({ CODEX_HOME: '/data/.corral/codex/home/.codex', CODEX_CA_CERTIFICATE: '/etc/corral/bundle.pem', HTTPS_PROXY: 'http://corral:t@127.0.0.1:3128', OPENAI_API_KEY: expect.any(String) })
    const config = fresh.files!['/data/.corral/codex/home/.codex/config.toml']!
    expect(config).toContain('base_url = "https://api.example/v1"')
    expect(config).toContain('supports_websockets = true')
    expect(config).toMatch(/check_for_update_on_startup = false[\s\S]*\[analytics\]\nenabled = false/)
    const resumed = codex.invocation({ ...(ctx as object), session: { id: 'thread-1', resume: true } } as never)
    expect(resumed.argv.slice(1, 3)).toEqual(['exec', 'resume'])
    expect(resumed.argv.slice(-2)).toEqual(['thread-1', '-'])
  })
})
