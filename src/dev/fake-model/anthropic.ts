// Anthropic Messages, `POST /v1/messages` with `stream: true`: message_start (input usage), ping,
// content blocks (thinking with its signature, text, tool_use with input_json_delta pieces),
// message_delta (stop reason, output usage), message_stop. Without `stream` the whole message as
// one JSON body. Errors are `{type: "error", error: {type, message}}`.
import { pieces, type Channel } from './channel.js'
import { defaultUsage, toolCount, type ScriptedReply } from './types.js'

const ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error', 401: 'authentication_error', 403: 'permission_error', 404: 'not_found_error',
  413: 'request_too_large', 429: 'rate_limit_error', 500: 'api_error', 529: 'overloaded_error',
}

export function anthropicError(status: number, message: string): unknown {
  return { type: 'error', error: { type: ERROR_TYPES[status] ?? 'api_error', message } }
}

function stopReason(reply: ScriptedReply): string {
  return reply.stop ?? (toolCount(reply) > 0 ? 'tool_use' : 'end_turn')
}

export async function writeAnthropic(ch: Channel, reply: ScriptedReply, index: number, body: any): Promise<void> {
  const block = async (i: number, start: unknown, deltas: unknown[]): Promise<void> => {
    await ch.event('content_block_start', { type: 'content_block_start', index: i, content_block: start })
    for (const delta of deltas) await ch.event('content_block_delta', { type: 'content_block_delta', index: i, delta })
    await ch.event('content_block_stop', { type: 'content_block_stop', index: i })
  }
  const usage = reply.usage ?? defaultUsage(index)
  await ch.event('message_start', {
    type: 'message_start',
    message: {
      id: `msg_fake_${index}`, type: 'message', role: 'assistant', model: body.model, content: [], stop_reason: null, stop_sequence: null,
      usage: { input_tokens: usage.input, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1 },
    },
  })
  await ch.event('ping', { type: 'ping' })
  let i = 0
  if (reply.thinking !== undefined) {
    const deltas = [...pieces(reply.thinking, 5).map((p) => ({ type: 'thinking_delta', thinking: p })), { type: 'signature_delta', signature: `sig-${index}` }]
    await block(i++, { type: 'thinking', thinking: '' }, deltas)
  }
  if (reply.text !== undefined) await block(i++, { type: 'text', text: '' }, pieces(reply.text, 6).map((p) => ({ type: 'text_delta', text: p })))
  for (const [n, tool] of (reply.tools ?? []).entries()) {
    const deltas = ['', ...pieces(JSON.stringify(tool.input), 7)].map((p) => ({ type: 'input_json_delta', partial_json: p }))
    await block(i++, { type: 'tool_use', id: `toolu_${index}_${n}`, name: tool.name, input: {} }, deltas)
  }
  await ch.event('message_delta', { type: 'message_delta', delta: { stop_reason: stopReason(reply), stop_sequence: null }, usage: { output_tokens: usage.output } })
  await ch.event('message_stop', { type: 'message_stop' })
}

/** The non-streaming answer: the same message as one object. */
export function anthropicMessage(reply: ScriptedReply, index: number, body: any): unknown {
  const usage = reply.usage ?? defaultUsage(index)
  const content: unknown[] = []
  if (reply.thinking !== undefined) content.push({ type: 'thinking', thinking: reply.thinking, signature: `sig-${index}` })
  if (reply.text !== undefined) content.push({ type: 'text', text: reply.text })
  for (const [n, tool] of (reply.tools ?? []).entries()) content.push({ type: 'tool_use', id: `toolu_${index}_${n}`, name: tool.name, input: tool.input })
  return {
    id: `msg_fake_${index}`, type: 'message', role: 'assistant', model: body.model, content, stop_reason: stopReason(reply), stop_sequence: null,
    usage: { input_tokens: usage.input, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: usage.output },
  }
}

/** `POST /v1/messages/count_tokens`: a rough count (four characters a token) of the request. */
export function anthropicCount(body: unknown): unknown {
  return { input_tokens: Math.max(1, Math.ceil(JSON.stringify(body ?? {}).length / 4)) }
}
