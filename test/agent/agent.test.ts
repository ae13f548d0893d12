import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Agent } from '../../src/agent/agent-loop.js'
import { AnthropicClient } from '../../src/agent/anthropic.js'
import { createDispatcher } from '../../src/agent/config.js'
import { MemoryEventSink } from '../../src/agent/event-sink.js'
import { OpenAiClient } from '../../src/agent/openai.js'
import { ListTaskSource } from '../../src/agent/task-source.js'
import { Toolbox } from '../../src/agent/tools.js'
import { LeafMinter, loadOrCreateCa } from '../../src/proxy/ca.js'
import { type FakeProvider, type Script, startFakeAnthropic, startFakeOpenAi } from './fake-model.js'

// The model API is the only fake here: a real HTTPS server speaking the providers' streaming wire
// formats, with a certificate from a corral CA the agent is told to trust.
let dir: string
let caFile: string
let tls: { key: string; cert: string }

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'corral-agent-'))
  const ca = await loadOrCreateCa(join(dir, 'ca'))
  tls = await new LeafMinter(ca).pemFor('127.0.0.1')
  caFile = join(dir, 'ca.pem')
  await writeFile(caFile, ca.certPem)
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

/** The script both providers run: write a file and run a command in one turn, then finish. */
const toolScript: Script = (_body, index) => index === 0
  ? {
      thinking: 'I should write the file, then check it.',
      text: 'Writing the greeting.',
      tools: [
        { name: 'write_file', input: { path: 'out/hello.txt', content: 'hello from the model\n' } },
        { name: 'run_command', input: { command: 'cat out/hello.txt; wc -c < out/hello.txt > out/size.txt; echo ran' } },
      ],
      usage: { input: 1200, output: 80 },
    }
  : { tools: [{ name: 'finish', input: { summary: 'Wrote out/hello.txt and measured it.' } }], usage: { input: 1500, output: 30 } }

async function workspace(): Promise<string> {
  return mkdtemp(join(dir, 'ws-'))
}

type Client = 'anthropic' | 'openai'
async function harness(kind: Client, script: Script, root: string, options: Partial<ConstructorParameters<typeof Agent>[0]> = {}) {
  const provider: FakeProvider = kind === 'anthropic' ? await startFakeAnthropic(script, tls) : await startFakeOpenAi(script, tls)
  const dispatcher = createDispatcher({ caFile })
  const model = kind === 'anthropic'
    ? new AnthropicClient({ baseUrl: provider.url, model: 'claude-test', dispatcher })
    : new OpenAiClient({ baseUrl: `${provider.url}/v1`, model: 'gpt-test', dispatcher })
  const sink = new MemoryEventSink()
  const agent = new Agent({ model, tools: new Toolbox(root), sink, backoff: async () => {}, ...options })
  return {
    provider, sink, agent,
    close: async () => {
      await dispatcher.close()
      await provider.close()
    },
  }
}

describe.each(['anthropic', 'openai'] as const)('Agent with the %s streaming API', (kind) => {
  it('runs tools the model calls (write a file, run a command), then finishes, reporting every step', async () => {
    const root = await workspace()
    const h = await harness(kind, toolScript, root, {
      defaults: { environment: 'staging', environment_description: 'Staging copy of the billing service.', thinking_effort: 'medium' },
    })
    try {
      const [outcome] = await h.agent.runSession(new ListTaskSource([{ id: 'task_1', description: 'Say hello in out/hello.txt' }]))
      expect(outcome).toMatchObject({ task_id: 'task_1', status: 'completed', summary: 'Wrote out/hello.txt and measured it.', iterations: 2 })
      expect(outcome.usage).toEqual({ input_tokens: 2700, output_tokens: 110 })
      expect(await readFile(join(root, 'out/hello.txt'), 'utf8')).toBe('hello from the model\n')
      expect((await readFile(join(root, 'out/size.txt'), 'utf8')).trim()).toBe('21')

      expect(h.sink.types()).toEqual([
        'session_start', 'task_start',
        'iteration_start', 'agent_thinking', 'agent_response',
        'tool_call', 'tool_result', 'file_change', 'tool_call', 'tool_result', 'file_change',
        'progress_status', 'iteration_end',
        'iteration_start', 'tool_call', 'tool_result', 'progress_status', 'iteration_end',
        'task_end', 'session_end',
      ])
      const ev = (type: string) => h.sink.events.filter((e) => e.type === type)
      expect(ev('agent_thinking')[0]).toMatchObject({ text: 'I should write the file, then check it.', task_id: 'task_1' })
      expect(ev('agent_response')[0]).toMatchObject({ text: 'Writing the greeting.' })
      // The shell command's own change only: write_file's file is not reported a second time.
      expect(ev('file_change').map((e) => [e.path, e.action, e.size, e.iteration])).toEqual([['out/hello.txt', 'created', 21, 1], ['out/size.txt', 'created', 3, 1]])
      expect(ev('tool_call')[0]).toMatchObject({ tool: 'write_file', input: { path: 'out/hello.txt', content: 'hello from the model\n' } })
      expect(ev('tool_result')[1]).toMatchObject({ tool: 'run_command', is_error: false, output: 'exit code 0\nhello from the model\nran\n' })
      expect(ev('task_start')[0]).toMatchObject({ description: 'Say hello in out/hello.txt', thinking_effort: 'medium', environment: 'staging' })
      expect(ev('task_end')[0]).toMatchObject({ status: 'completed', iterations: 2 })
      expect(h.sink.events.every((e) => typeof e.timestamp === 'string')).toBe(true)

      // What went over the wire: the settings, the tools, and the tool results fed back.
      const [first, second] = h.provider.requests
      expect(first.body.stream).toBe(true)
      if (kind === 'anthropic') {
        expect(first.headers['anthropic-version']).toBe('2023-06-01')
        expect(first.body.thinking).toEqual({ type: 'enabled', budget_tokens: 8000 })
        expect(first.body.system).toContain('Environment: staging.')
        expect(first.body.system).toContain('Staging copy of the billing service.')
        expect(first.body.tools.map((t: { name: string }) => t.name)).toEqual(['run_command', 'read_file', 'write_file', 'finish'])
        const results = second.body.messages.at(-1)
        expect(results.role).toBe('user')
        expect(results.content.map((b: { type: string; tool_use_id: string }) => [b.type, b.tool_use_id])).toEqual([['tool_result', 'toolu_0_0'], ['tool_result', 'toolu_0_1']])
        // Thinking goes back verbatim with its signature (the API requires it with tool use).
        expect(second.body.messages[1].content[0]).toEqual({ type: 'thinking', thinking: 'I should write the file, then check it.', signature: 'sig-0' })
      } else {
        expect(first.body.reasoning_effort).toBe('medium')
        expect(first.body.stream_options).toEqual({ include_usage: true })
        expect(first.body.messages[0]).toMatchObject({ role: 'system' })
        expect(first.body.messages[0].content).toContain('Staging copy of the billing service.')
        expect(first.body.tools[0]).toMatchObject({ type: 'function', function: { name: 'run_command' } })
        const msgs = second.body.messages
        expect(msgs[2]).toMatchObject({ role: 'assistant', content: 'Writing the greeting.', tool_calls: [{ id: 'call_0_0', function: { name: 'write_file' } }, { id: 'call_0_1' }] })
        expect(msgs.slice(3).map((m: { role: string; tool_call_id: string }) => [m.role, m.tool_call_id])).toEqual([['tool', 'call_0_0'], ['tool', 'call_0_1']])
      }
    } finally {
      await h.close()
    }
  })

  it('compacts the conversation when it outgrows max_context_tokens', async () => {
    const root = await workspace()
    const script: Script = (body, index) => {
      if (index === 0) return { tools: [{ name: 'write_file', input: { path: 'a.txt', content: 'a' } }], usage: { input: 5000, output: 100 } }
      const last = JSON.stringify(kind === 'anthropic' ? body.messages.at(-1) : body.messages.at(-1))
      if (last.includes('about to be compacted')) return { text: 'SUMMARY: wrote a.txt', usage: { input: 5100, output: 10 } }
      return { tools: [{ name: 'finish', input: { summary: 'done after compaction' } }], usage: { input: 50, output: 5 } }
    }
    const h = await harness(kind, script, root)
    try {
      const [outcome] = await h.agent.runSession(new ListTaskSource([{ id: 'task_c', description: 'long job', max_context_tokens: 1000 }]))
      expect(outcome.status).toBe('completed')
      expect(h.sink.types()).toContain('compaction_start')
      expect(h.sink.events.find((e) => e.type === 'compaction_start')).toMatchObject({ context_tokens: 5100, max_context_tokens: 1000 })
      expect(h.sink.events.find((e) => e.type === 'compaction_end')).toMatchObject({ messages_after: 1 })
      // After compaction the model sees one summary message instead of the history.
      const after = h.provider.requests[2].body.messages.filter((m: { role: string }) => m.role !== 'system')
      expect(after).toHaveLength(1)
      expect(JSON.stringify(after[0])).toContain('SUMMARY: wrote a.txt')
    } finally {
      await h.close()
    }
  })
})

describe('Agent task handling', () => {
  it('nudges a model that stops without finish while max_continuations remain', async () => {
    const root = await workspace()
    const h = await harness('anthropic', (_b, i) => ({ text: `part ${i + 1}` }), root)
    try {
      const [outcome] = await h.agent.runSession(new ListTaskSource([{ id: 't', description: 'write an essay', max_continuations: 2 }]))
      expect(outcome).toMatchObject({ status: 'completed', summary: 'part 3', iterations: 3 })
      expect(JSON.stringify(h.provider.requests[1].body.messages.at(-1))).toContain('Continue working on the task')
    } finally {
      await h.close()
    }
  })

  it('keeps the session across tasks, and reset_session starts a fresh one', async () => {
    const root = await workspace()
    const sessionFile = join(root, '.corral/session.json')
    const h = await harness('anthropic', () => ({ tools: [{ name: 'finish', input: { summary: 'ok' } }] }), root, { sessionFile })
    try {
      await h.agent.runSession(new ListTaskSource([{ id: 't1', description: 'first' }, { id: 't2', description: 'second' }]))
      // user(first), assistant(finish), user(finish result + second)
      expect(h.provider.requests[1].body.messages).toHaveLength(3)
      expect(JSON.stringify(h.provider.requests[1].body.messages)).toContain('first')
      // A new agent process resumes from the file (a restarted or forked workspace).
      const again = await harness('anthropic', () => ({ tools: [{ name: 'finish', input: { summary: 'ok' } }] }), root, { sessionFile })
      try {
        await again.agent.runSession(new ListTaskSource([{ id: 't3', description: 'third' }]))
        expect(JSON.stringify(again.provider.requests[0].body.messages)).toContain('second')
        expect(again.sink.events[0]).toMatchObject({ type: 'session_start', resumed: true })
        await again.agent.runSession(new ListTaskSource([{ id: 't4', description: 'fourth', reset_session: true }]))
        expect(again.provider.requests[1].body.messages).toHaveLength(1)
        expect(again.sink.events.filter((e) => e.type === 'session_start').at(-1)).toMatchObject({ resumed: false, reset: true })
      } finally {
        await again.close()
      }
    } finally {
      await h.close()
    }
  })

  it('retries an overloaded provider and fails the task with model_error on a client error', async () => {
    const root = await workspace()
    const h = await harness('anthropic', (_b, i) => i === 0 ? { status: 529 } : i === 1 ? { tools: [{ name: 'finish', input: { summary: 'after retry' } }] } : { status: 400 }, root)
    try {
      const [ok, bad] = await h.agent.runSession(new ListTaskSource([{ id: 'a', description: 'x' }, { id: 'b', description: 'y' }]))
      expect(ok).toMatchObject({ status: 'completed', summary: 'after retry' })
      expect(bad).toMatchObject({ status: 'failed', reason: 'model_error' })
      expect(bad.summary).toMatch(/anthropic answered 400/)
      expect(h.sink.events.filter((e) => e.type === 'task_end').at(-1)).toMatchObject({ status: 'failed', reason: 'model_error' })
    } finally {
      await h.close()
    }
  })

  it('ends the task as interrupted when stopped mid-tool, killing the running command', async () => {
    const root = await workspace()
    const h = await harness('anthropic', () => ({ tools: [{ name: 'run_command', input: { command: 'echo started > started.txt; sleep 60' } }] }), root)
    const controller = new AbortController()
    try {
      const run = h.agent.runSession(new ListTaskSource([{ id: 'long', description: 'wait' }]), controller.signal)
      while (!(await readFile(join(root, 'started.txt'), 'utf8').catch(() => ''))) await new Promise((r) => setTimeout(r, 20))
      controller.abort()
      const [outcome] = await run
      expect(outcome).toMatchObject({ status: 'failed', reason: 'interrupted', iterations: 1 })
      expect(h.sink.events.find((e) => e.type === 'tool_result')).toMatchObject({ is_error: true, output: expect.stringMatching(/^killed by SIGKILL/) })
      expect(h.sink.types().slice(-2)).toEqual(['task_end', 'session_end'])
    } finally {
      await h.close()
    }
  })

  it('reports long tool input clipped in tool_call events while the tool gets all of it', async () => {
    const root = await workspace()
    const big = 'x'.repeat(10_000)
    const h = await harness('anthropic', (_b, i) => i === 0 ? { tools: [{ name: 'write_file', input: { path: 'big.txt', content: big } }] } : { tools: [{ name: 'finish', input: { summary: 'ok' } }] }, root)
    try {
      await h.agent.runSession(new ListTaskSource([{ id: 'big', description: 'write a big file' }]))
      expect(await readFile(join(root, 'big.txt'), 'utf8')).toBe(big)
      const call = h.sink.events.find((e) => e.type === 'tool_call')!
      expect((call.input as { content: string }).content).toMatch(/^x{2000}… \[8000 more characters\]$/)
    } finally {
      await h.close()
    }
  })

  it('stops a model that never finishes at the iteration limit', async () => {
    const root = await workspace()
    const h = await harness('openai', () => ({ tools: [{ name: 'read_file', input: { path: 'missing.txt' } }] }), root, { maxIterations: 3 })
    try {
      const [outcome] = await h.agent.runSession(new ListTaskSource([{ id: 'loop', description: 'spin' }]))
      expect(outcome).toMatchObject({ status: 'failed', reason: 'iteration_limit', iterations: 3 })
      expect(h.sink.events.filter((e) => e.type === 'tool_result')[0]).toMatchObject({ is_error: true })
    } finally {
      await h.close()
    }
  })
})
