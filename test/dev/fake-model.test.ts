// corral dev's fake model with the demo script, in both wire formats: the three scripted turns,
// the usage events the proxy meters, the key check that proves the credential was injected.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DEMO, demoScript, startFakeModel, type FakeModel } from '../../src/dev/index.js'

describe('fake model + demo script', () => {
  let model: FakeModel
  beforeAll(async () => {
    model = await startFakeModel({ script: demoScript, apiKey: DEMO.apiKey })
  })
  afterAll(() => model.close())

  const post = (path: string, body: unknown, headers: Record<string, string>) =>
    fetch(`${model.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })

  it('Anthropic: write_file, then run_command, then finish; message_delta carries the output usage', async () => {
    const task = { role: 'user', content: [{ type: 'text', text: 'Greet the team\nmore words' }] }
    const turn = (n: number) => [task, ...Array.from({ length: n }, () => [
      { role: 'assistant', content: [{ type: 'tool_use', id: 't', name: 'x', input: {} }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: 'ok' }] },
    ]).flat()]
    const texts = await Promise.all([0, 1, 2].map(async (n) => (await post('/v1/messages', { model: 'demo-1', stream: true, messages: turn(n) }, { 'x-api-key': DEMO.apiKey })).text()))
    expect(texts[0]).toContain('"name":"write_file"')
    // The tool input arrives in input_json_delta pieces, as from the real API.
    const input = texts[0]!.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)))
      .map((d) => d.delta?.partial_json ?? '').join('')
    expect(JSON.parse(input)).toMatchObject({ path: 'hello.md', content: expect.stringMatching(/^# Greet the team\n/) })
    expect(texts[0]).toMatch(/event: message_delta\ndata: .*"usage":\{"output_tokens":38\}/)
    expect(texts[1]).toContain('"name":"run_command"')
    expect(texts[2]).toContain('"name":"finish"')
    expect(texts[2]).toContain('event: message_stop')
  })

  it('OpenAI: the same script in chat.completion.chunk form, a usage chunk, then [DONE]', async () => {
    const messages = [
      { role: 'system', content: 'sys' },
      { role: 'user', content: 'Greet the team' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'write_file', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'c', content: 'ok' },
    ]
    const text = await (await post('/v1/chat/completions', { model: 'demo-1', stream: true, messages }, { authorization: `Bearer ${DEMO.apiKey}` })).text()
    expect(text).toContain('"name":"run_command"')
    expect(text).toContain('"finish_reason":"tool_calls"')
    expect(text).toContain('"usage":{"prompt_tokens":530,"completion_tokens":24,"total_tokens":554}')
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true)
  })

  it('refuses a request without the key (401) and any other path (404)', async () => {
    const noKey = await post('/v1/messages', { model: 'demo-1', messages: [] }, {})
    expect(noKey.status).toBe(401)
    expect((await noKey.json() as any).error.type).toBe('authentication_error')
    expect((await post('/v1/models', {}, { 'x-api-key': DEMO.apiKey })).status).toBe(404)
  })
})
