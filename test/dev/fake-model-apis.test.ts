// The fake model in each API the agent CLIs speak, read back as their clients read it: Anthropic
// Messages, OpenAI Chat Completions, OpenAI Responses over SSE and WebSocket (a conversation
// continued by previous_response_id), Gemini streamGenerateContent and generateContent; usage in
// each; the CLI script's tool calls shaped by the tools the request declares; its scripted
// failures (429 with Retry-After, 500, a cut stream) in each API's own error shape.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { WebSocket } from 'ws'
import { cliScript, startFakeModel, type FakeModel } from '../../src/dev/index.js'

/** SSE events as `{event, data}` (CRLF or LF framing), `[DONE]` kept as a string. */
function sse(text: string): Array<{ event?: string; data: any }> {
  return text.split(/\r?\n\r?\n/).filter((b) => b.trim() !== '').map((block) => {
    const lines = block.split(/\r?\n/)
    const event = lines.find((l) => l.startsWith('event: '))?.slice(7)
    const raw = lines.filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n')
    return { ...(event ? { event } : {}), data: raw === '[DONE]' ? raw : JSON.parse(raw) }
  })
}

const CLAUDE_TOOLS = [
  { name: 'Write', input_schema: { type: 'object', properties: { file_path: { type: 'string' }, content: { type: 'string' } }, required: ['file_path', 'content'] } },
  { name: 'Bash', input_schema: { type: 'object', properties: { command: { type: 'string' }, description: { type: 'string' } }, required: ['command'] } },
]
const CODEX_TOOLS = [{ type: 'function', name: 'exec_command', parameters: { type: 'object', properties: { cmd: { type: 'string' }, workdir: { type: 'string' } }, required: ['cmd'] } }]
const GEMINI_TOOLS = [{ functionDeclarations: [
  { name: 'write_file', parametersJsonSchema: { type: 'object', properties: { file_path: { type: 'string' }, content: { type: 'string' } }, required: ['file_path', 'content'] } },
  { name: 'run_shell_command', parametersJsonSchema: { type: 'object', properties: { command: { type: 'string' }, description: { type: 'string' } }, required: ['command'] } },
] }]
const OPENCODE_TOOLS = [
  { type: 'function', function: { name: 'write', parameters: { type: 'object', properties: { filePath: { type: 'string' }, content: { type: 'string' } }, required: ['filePath', 'content'] } } },
  { type: 'function', function: { name: 'bash', parameters: { type: 'object', properties: { command: { type: 'string' }, description: { type: 'string' } }, required: ['command', 'description'] } } },
]

describe('fake model: the agent CLIs\' APIs', () => {
  let model: FakeModel
  beforeAll(async () => {
    model = await startFakeModel({ script: cliScript(), record: true, apiKey: 'sk-fake' })
  })
  afterAll(() => model.close())

  const post = (path: string, body: unknown, headers: Record<string, string> = { 'x-api-key': 'sk-fake' }) =>
    fetch(`${model.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })

  it('Anthropic Messages: Claude Code\'s Write with an absolute file_path, then Bash; usage in message_start and message_delta', async () => {
    const system = [{ type: 'text', text: 'Primary working directory: /data' }]
    const prompt = { role: 'user', content: [{ type: 'text', text: '<system-reminder>\ncontext\n</system-reminder>' }, { type: 'text', text: 'Greet the team' }] }
    const res = await post('/v1/messages?beta=true', { model: 'claude-x', stream: true, system, tools: CLAUDE_TOOLS, messages: [prompt] })
    expect(res.headers.get('content-type')).toBe('text/event-stream')
    const events = sse(await res.text())
    expect(events.map((e) => e.event).filter((e) => e !== 'content_block_delta')).toEqual([
      'message_start', 'ping', 'content_block_start', 'content_block_stop', 'content_block_start', 'content_block_stop', 'message_delta', 'message_stop',
    ])
    for (const e of events) expect(e.data.type).toBe(e.event)
    expect(events[0]!.data.message.usage.input_tokens).toBeGreaterThan(0)
    const tool = events.find((e) => e.data.content_block?.type === 'tool_use')!.data.content_block
    expect(tool).toMatchObject({ type: 'tool_use', name: 'Write', input: {} })
    const input = JSON.parse(events.filter((e) => e.data.delta?.type === 'input_json_delta').map((e) => e.data.delta.partial_json).join(''))
    expect(input).toEqual({ file_path: '/data/hello.md', content: expect.stringMatching(/^# Greet the team\n/) })
    expect(events.at(-2)!.data).toMatchObject({ delta: { stop_reason: 'tool_use' }, usage: { output_tokens: expect.any(Number) } })

    const result = { role: 'user', content: [{ type: 'tool_result', tool_use_id: tool.id, content: 'ok' }, { type: 'text', text: '<system-reminder>x</system-reminder>' }] }
    const second = sse(await (await post('/v1/messages', { model: 'claude-x', stream: true, tools: CLAUDE_TOOLS, messages: [prompt, { role: 'assistant', content: [tool] }, result] })).text())
    const json = second.filter((e) => e.data.delta?.type === 'input_json_delta').map((e) => e.data.delta.partial_json).join('')
    expect(JSON.parse(json)).toEqual({ command: 'ls && wc -w hello.md', description: expect.any(String) })
  })

  it('Anthropic without stream: one message object, as the real API answers', async () => {
    const res = await post('/v1/messages', { model: 'claude-x', tools: CLAUDE_TOOLS, messages: [{ role: 'user', content: 'fake:text hi' }] })
    expect(res.headers.get('content-type')).toBe('application/json')
    expect(await res.json()).toMatchObject({ type: 'message', role: 'assistant', stop_reason: 'end_turn', content: [{ type: 'text' }], usage: { input_tokens: expect.any(Number), output_tokens: expect.any(Number) } })
  })

  it('OpenAI Chat Completions: OpenCode\'s write (filePath) and bash with its required description; usage chunk and [DONE]', async () => {
    const messages = [{ role: 'system', content: 'Working directory: /data' }, { role: 'user', content: 'Greet the team' }]
    const events = sse(await (await post('/v1/chat/completions', { model: 'm', stream: true, tools: OPENCODE_TOOLS, messages }, { authorization: 'Bearer sk-fake' })).text())
    expect(events.at(-1)!.data).toBe('[DONE]')
    const chunks = events.slice(0, -1).map((e) => e.data)
    for (const c of chunks) expect(c.object).toBe('chat.completion.chunk')
    const args = chunks.flatMap((c) => c.choices).flatMap((ch: any) => ch.delta?.tool_calls ?? []).map((t: any) => t.function.arguments).join('')
    expect(JSON.parse(args)).toEqual({ filePath: '/data/hello.md', content: expect.any(String) })
    expect(chunks.at(-2)!.choices[0].finish_reason).toBe('tool_calls')
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number) } })

    const call = { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'write', arguments: '{}' } }] }
    const second = sse(await (await post('/v1/chat/completions', { model: 'm', stream: true, tools: OPENCODE_TOOLS, messages: [...messages, call, { role: 'tool', tool_call_id: 'c', content: 'ok' }] }, { authorization: 'Bearer sk-fake' })).text())
    const args2 = second.slice(0, -1).flatMap((e) => e.data.choices).flatMap((ch: any) => ch.delta?.tool_calls ?? []).map((t: any) => t.function.arguments).join('')
    expect(JSON.parse(args2)).toEqual({ command: 'ls && wc -w hello.md', description: expect.any(String) })
  })

  it('OpenAI Responses over SSE: Codex\'s exec_command carrying an apply_patch, events named by type with sequence numbers, usage on response.completed', async () => {
    const input = [
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: '<environment_context>\n  <cwd>/data</cwd>\n</environment_context>' }] },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Greet the team' }] },
    ]
    const events = sse(await (await post('/v1/responses', { model: 'gpt-x', stream: true, tools: CODEX_TOOLS, input }, { authorization: 'Bearer sk-fake' })).text())
    expect(events.map((e) => e.data.sequence_number)).toEqual(events.map((_, i) => i))
    for (const e of events) expect(e.data.type).toBe(e.event)
    expect(events[0]!.event).toBe('response.created')
    const done = events.at(-1)!.data
    expect(done).toMatchObject({ type: 'response.completed', response: { status: 'completed', usage: { input_tokens: expect.any(Number), output_tokens: expect.any(Number), total_tokens: expect.any(Number) } } })
    const call = done.response.output.find((o: any) => o.type === 'function_call')
    expect(call).toMatchObject({ name: 'exec_command', call_id: expect.any(String), status: 'completed' })
    const args = JSON.parse(call.arguments)
    expect(args.cmd).toMatch(/^apply_patch <<'PATCH'\n\*\*\* Begin Patch\n\*\*\* Add File: hello\.md\n\+# Greet the team\n/)
    expect(args.workdir).toBe('/data')
    const deltas = events.filter((e) => e.event === 'response.function_call_arguments.delta').map((e) => e.data.delta).join('')
    expect(deltas).toBe(call.arguments)
  })

  it('OpenAI Responses over WebSocket: response.create frames, a conversation continued by previous_response_id, an unknown id refused', async () => {
    const ws = new WebSocket(`${model.url.replace('http', 'ws')}/v1/responses`, { headers: { authorization: 'Bearer sk-fake' } })
    const frames: any[] = []
    ws.on('message', (d) => frames.push(JSON.parse(d.toString())))
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject))
    const completed = async (n: number): Promise<any> => {
      await expect.poll(() => frames.filter((f) => f.type === 'response.completed' || f.type === 'error').length, { timeout: 5000 }).toBe(n)
      return frames.filter((f) => f.type === 'response.completed' || f.type === 'error')[n - 1]
    }
    const input = [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Greet the team' }] }]
    ws.send(JSON.stringify({ type: 'response.create', model: 'gpt-x', tools: CODEX_TOOLS, input }))
    const first = await completed(1)
    const call = first.response.output.find((o: any) => o.type === 'function_call')
    // Only the new item travels; the fake continues the conversation it kept (input, then the answer's message and call).
    ws.send(JSON.stringify({ type: 'response.create', model: 'gpt-x', tools: CODEX_TOOLS, previous_response_id: first.response.id, input: [{ type: 'function_call_output', call_id: call.call_id, output: 'ok' }] }))
    const second = await completed(2)
    expect(JSON.parse(second.response.output.find((o: any) => o.type === 'function_call').arguments).cmd).toBe('ls && wc -w hello.md')
    ws.send(JSON.stringify({ type: 'response.create', model: 'gpt-x', previous_response_id: 'resp_unknown', input: [] }))
    expect(await completed(3)).toMatchObject({ type: 'error', status: 400, error: { code: 'previous_response_not_found' } })
    const seen = model.requests.filter((r) => r.transport === 'websocket')
    expect(seen.map((r) => (r.body.input as unknown[]).length)).toEqual([1, 4])
    ws.close()
  })

  it('Gemini: streamGenerateContent?alt=sse with CRLF framing, write_file then run_shell_command, usageMetadata with the finish reason; generateContent answers a JSON-schema request with a value of it', async () => {
    const contents = [{ role: 'user', parts: [{ text: '<session_context>\n- **Workspace Directories:**\n  - /data\n</session_context>' }, { text: 'Greet the team' }] }]
    const res = await post('/v1beta/models/gemini-x:streamGenerateContent?alt=sse', { contents, tools: GEMINI_TOOLS }, { 'x-goog-api-key': 'sk-fake' })
    const text = await res.text()
    expect(text).toContain('\r\n\r\n')
    const chunks = sse(text).map((e) => e.data)
    const last = chunks.at(-1)
    expect(last.candidates[0]).toMatchObject({ finishReason: 'STOP', content: { role: 'model', parts: [{ functionCall: { name: 'write_file', args: { file_path: '/data/hello.md', content: expect.any(String) } } }] } })
    expect(last.usageMetadata).toMatchObject({ promptTokenCount: expect.any(Number), candidatesTokenCount: expect.any(Number), totalTokenCount: expect.any(Number) })
    const next = [...contents, last.candidates[0].content, { role: 'user', parts: [{ functionResponse: { name: 'write_file', response: { output: 'ok' } } }] }]
    const second = sse(await (await post('/v1beta/models/gemini-x:streamGenerateContent?alt=sse', { contents: next, tools: GEMINI_TOOLS }, { 'x-goog-api-key': 'sk-fake' })).text())
    expect(second.at(-1)!.data.candidates[0].content.parts[0].functionCall).toMatchObject({ name: 'run_shell_command', args: { command: 'ls && wc -w hello.md' } })

    const schema = { type: 'OBJECT', properties: { reasoning: { type: 'STRING' }, next_speaker: { type: 'STRING', enum: ['user', 'model'] }, score: { type: 'INTEGER' } }, required: ['reasoning', 'next_speaker'] }
    const json = await (await post('/v1beta/models/gemini-x:generateContent', { contents, generationConfig: { responseMimeType: 'application/json', responseJsonSchema: schema } }, { 'x-goog-api-key': 'sk-fake' })).json() as any
    expect(JSON.parse(json.candidates[0].content.parts[0].text)).toEqual({ reasoning: expect.any(String), next_speaker: 'user', score: 1 })
  })

  it('a resumed conversation: the final answer counts the tool results before the prompt', async () => {
    const earlier = [
      { role: 'user', content: 'first task' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'a', name: 'Write', input: {} }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'a', content: 'ok' }] },
      { role: 'assistant', content: 'done' },
    ]
    const res = await (await post('/v1/messages', { model: 'c', tools: CLAUDE_TOOLS, messages: [...earlier, { role: 'user', content: 'fake:text and now?' }] })).json() as any
    expect(res.content[0].text).toContain('1 tool results before this prompt')
  })

  it.each([
    ['anthropic', '/v1/messages', (p: string) => ({ model: 'c', stream: true, tools: CLAUDE_TOOLS, messages: [{ role: 'user', content: p }] }), { 'x-api-key': 'sk-fake' }, (b: any) => b.error.type],
    ['openai', '/v1/chat/completions', (p: string) => ({ model: 'm', stream: true, tools: OPENCODE_TOOLS, messages: [{ role: 'user', content: p }] }), { authorization: 'Bearer sk-fake' }, (b: any) => b.error.type],
    ['openai-responses', '/v1/responses', (p: string) => ({ model: 'g', stream: true, tools: CODEX_TOOLS, input: p }), { authorization: 'Bearer sk-fake' }, (b: any) => b.error.code],
    ['gemini', '/v1beta/models/g:streamGenerateContent?alt=sse', (p: string) => ({ contents: [{ role: 'user', parts: [{ text: p }] }], tools: GEMINI_TOOLS }), { 'x-goog-api-key': 'sk-fake' }, (b: any) => b.error.status],
  ] as const)('%s: fake:429 (Retry-After), fake:500, fake:cut, and a -once failure that the retry gets past', async (api, path, body, headers, kind) => {
    const limited = await post(path, body(`go fake:429 ${api}`), headers)
    expect(limited.status).toBe(429)
    expect(limited.headers.get('retry-after')).toBe('1')
    expect(kind(await limited.json())).toBe({ anthropic: 'rate_limit_error', openai: 'requests', 'openai-responses': 'rate_limit_exceeded', gemini: 'RESOURCE_EXHAUSTED' }[api])
    const broken = await post(path, body(`go fake:500 ${api}`), headers)
    expect(broken.status).toBe(500)
    expect(kind(await broken.json())).toBe({ anthropic: 'api_error', openai: 'server_error', 'openai-responses': 'server_error', gemini: 'INTERNAL' }[api])
    // A cut stream: the status and the first events arrive, then the connection drops before the end.
    const cut = await post(path, body(`go fake:cut ${api}`), headers)
    expect(cut.status).toBe(200)
    await expect(cut.text()).rejects.toThrow()
    const once = `once fake:500-once ${api}`
    expect((await post(path, body(once), headers)).status).toBe(500)
    const retried = await post(path, body(once), headers)
    expect(retried.status).toBe(200)
    expect(await retried.text()).toMatch(/"tool_use"|"tool_calls"|"function_call"|"functionCall"/)
  })

  it('refuses a request without the key in every API\'s own error shape', async () => {
    const anth = await post('/v1/messages', { model: 'c', messages: [] }, {})
    expect(anth.status).toBe(401)
    expect(await anth.json()).toMatchObject({ type: 'error', error: { type: 'authentication_error' } })
    const gem = await post('/v1beta/models/g:generateContent', { contents: [] }, {})
    expect(await gem.json()).toMatchObject({ error: { code: 401, status: 'UNAUTHENTICATED' } })
    const ws = new WebSocket(`${model.url.replace('http', 'ws')}/v1/responses`)
    const status = await new Promise<number>((resolve) => ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0)))
    expect(status).toBe(401)
  })
})
