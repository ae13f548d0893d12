// OpenAI Chat Completions, `POST /v1/chat/completions` with `stream: true`: `data:`-only
// chat.completion.chunk events (role, reasoning_content, content, tool_calls fragments by index),
// a finish_reason chunk, a usage chunk with empty choices, then `data: [DONE]`. Without `stream`
// one chat.completion object. Errors are `{error: {message, type, param, code}}`.
import { pieces, type Channel } from './channel.js'
import { defaultUsage, toolCount, type ScriptedReply } from './types.js'

const CREATED = 1_760_000_000

export function openAiError(status: number, message: string): unknown {
  if (status === 429) return { error: { message, type: 'requests', param: null, code: 'rate_limit_exceeded' } }
  if (status === 401) return { error: { message, type: 'invalid_request_error', param: null, code: 'invalid_api_key' } }
  if (status >= 500) return { error: { message, type: 'server_error', param: null, code: null } }
  return { error: { message, type: 'invalid_request_error', param: null, code: null } }
}

function finishReason(reply: ScriptedReply): string {
  return reply.stop === 'max_tokens' ? 'length' : toolCount(reply) > 0 ? 'tool_calls' : 'stop'
}

function usageOf(reply: ScriptedReply, index: number): unknown {
  const u = reply.usage ?? defaultUsage(index)
  return { prompt_tokens: u.input, completion_tokens: u.output, total_tokens: u.input + u.output }
}

export async function writeOpenAiChat(ch: Channel, reply: ScriptedReply, index: number, body: any): Promise<void> {
  const id = `chatcmpl-fake-${index}`
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}): Promise<void> =>
    ch.event(null, { id, object: 'chat.completion.chunk', created: CREATED, model: body.model, system_fingerprint: 'fp_fake', choices, ...extra })
  const delta = (d: Record<string, unknown>): Promise<void> => chunk([{ index: 0, delta: d, logprobs: null, finish_reason: null }])
  await delta({ role: 'assistant', content: '' })
  if (reply.thinking !== undefined) for (const p of pieces(reply.thinking, 5)) await delta({ reasoning_content: p })
  if (reply.text !== undefined) for (const p of pieces(reply.text, 6)) await delta({ content: p })
  for (const [n, tool] of (reply.tools ?? []).entries()) {
    await delta({ tool_calls: [{ index: n, id: `call_${index}_${n}`, type: 'function', function: { name: tool.name, arguments: '' } }] })
    for (const p of pieces(JSON.stringify(tool.input), 7)) await delta({ tool_calls: [{ index: n, function: { arguments: p } }] })
  }
  await chunk([{ index: 0, delta: {}, logprobs: null, finish_reason: finishReason(reply) }])
  await chunk([], { usage: usageOf(reply, index) })
  await ch.raw('data: [DONE]')
}

export function openAiCompletion(reply: ScriptedReply, index: number, body: any): unknown {
  const tools = (reply.tools ?? []).map((tool, n) => ({ id: `call_${index}_${n}`, type: 'function', function: { name: tool.name, arguments: JSON.stringify(tool.input) } }))
  const message = { role: 'assistant', content: reply.text ?? null, refusal: null, ...(tools.length > 0 ? { tool_calls: tools } : {}) }
  return {
    id: `chatcmpl-fake-${index}`, object: 'chat.completion', created: CREATED, model: body.model, system_fingerprint: 'fp_fake',
    choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason(reply) }], usage: usageOf(reply, index),
  }
}
