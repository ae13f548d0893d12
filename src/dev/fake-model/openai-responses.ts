// OpenAI Responses, `POST /v1/responses` with `stream: true` (server-sent events named after their
// `type`) or, in socket mode, a WebSocket on the same path whose client sends `response.create`
// frames and receives the same events as JSON text frames. Every event carries `sequence_number`:
// response.created, response.in_progress, per output item response.output_item.added … (message:
// content_part.added, output_text.delta/done, content_part.done; function_call:
// function_call_arguments.delta/done) … response.output_item.done, then response.completed with
// the usage. A socket request may name `previous_response_id`: its input is only what is new, so
// the server keeps each response's whole conversation to continue from (a few hundred, the oldest
// dropped) and answers an unknown id with `previous_response_not_found`.
import { randomUUID } from 'node:crypto'
import { pieces, type Channel } from './channel.js'
import { defaultUsage, type ScriptedReply } from './types.js'

const CREATED = 1_760_000_000

export function responsesError(status: number, message: string): unknown {
  if (status === 429) return { error: { message, type: 'rate_limit_exceeded', param: null, code: 'rate_limit_exceeded' } }
  if (status >= 500) return { error: { message, type: 'server_error', param: null, code: 'server_error' } }
  return { error: { message, type: 'invalid_request_error', param: null, code: null } }
}

/** The error frame of socket mode: the HTTP status and headers it stands for, wrapped in an `error` event. */
export function responsesSocketError(status: number, body: any, retryAfter?: number): unknown {
  return { type: 'error', status, error: body?.error ?? body, ...(retryAfter !== undefined ? { headers: { 'retry-after': String(retryAfter) } } : {}) }
}

/** Each response's conversation (input then output), for `previous_response_id`. */
export class ResponseHistory {
  readonly #items = new Map<string, unknown[]>()
  constructor(private readonly limit = 256) {}

  /** The full input of a request: the named previous response's conversation, then this input; undefined when the id is unknown. */
  expand(body: any): unknown[] | undefined {
    const input = inputItems(body)
    const previous = body?.previous_response_id
    if (typeof previous !== 'string') return input
    const before = this.#items.get(previous)
    return before === undefined ? undefined : [...before, ...input]
  }

  remember(id: string, conversation: unknown[]): void {
    this.#items.set(id, conversation)
    if (this.#items.size > this.limit) this.#items.delete(this.#items.keys().next().value as string)
  }
}

/** A request's `input` as items: a bare string is one user message. */
export function inputItems(body: any): unknown[] {
  const input = body?.input
  if (typeof input === 'string') return [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: input }] }]
  return Array.isArray(input) ? input : []
}

/** Writes the response's events; returns its id and output items. */
export async function writeResponses(ch: Channel, reply: ScriptedReply, index: number, body: any): Promise<{ id: string; output: unknown[] }> {
  const id = `resp_${randomUUID().replaceAll('-', '')}`
  let seq = 0
  const ev = (type: string, data: Record<string, unknown>): Promise<void> => ch.event(type, { type, sequence_number: seq++, ...data })
  const response = (status: string, output: unknown[], usage: unknown): Record<string, unknown> => ({
    id, object: 'response', created_at: CREATED, status, error: null, incomplete_details: null, instructions: null, max_output_tokens: null,
    model: body.model, output, parallel_tool_calls: true, previous_response_id: body.previous_response_id ?? null, reasoning: { effort: null, summary: null },
    store: body.store ?? false, temperature: 1, text: { format: { type: 'text' } }, tool_choice: 'auto', tools: [], top_p: 1, truncation: 'disabled', usage,
    user: null, metadata: {},
  })
  await ev('response.created', { response: response('in_progress', [], null) })
  await ev('response.in_progress', { response: response('in_progress', [], null) })
  const output: unknown[] = []
  if (reply.thinking !== undefined) {
    const item = { id: `rs_${index}`, type: 'reasoning', summary: [{ type: 'summary_text', text: reply.thinking }], encrypted_content: null }
    await ev('response.output_item.added', { output_index: output.length, item: { ...item, summary: [] } })
    await ev('response.output_item.done', { output_index: output.length, item })
    output.push(item)
  }
  if (reply.text !== undefined) {
    const itemId = `msg_${index}`
    const at = { item_id: itemId, output_index: output.length, content_index: 0 }
    const part = { type: 'output_text', text: reply.text, annotations: [], logprobs: [] }
    await ev('response.output_item.added', { output_index: output.length, item: { id: itemId, type: 'message', status: 'in_progress', role: 'assistant', content: [] } })
    await ev('response.content_part.added', { ...at, part: { ...part, text: '' } })
    for (const p of pieces(reply.text, 6)) await ev('response.output_text.delta', { ...at, delta: p, logprobs: [] })
    await ev('response.output_text.done', { ...at, text: reply.text, logprobs: [] })
    await ev('response.content_part.done', { ...at, part })
    const item = { id: itemId, type: 'message', status: 'completed', role: 'assistant', content: [part] }
    await ev('response.output_item.done', { output_index: output.length, item })
    output.push(item)
  }
  for (const [n, tool] of (reply.tools ?? []).entries()) {
    const itemId = `fc_${index}_${n}`
    const args = JSON.stringify(tool.input)
    const base = { id: itemId, type: 'function_call', call_id: `call_${index}_${n}`, name: tool.name }
    await ev('response.output_item.added', { output_index: output.length, item: { ...base, arguments: '', status: 'in_progress' } })
    for (const p of pieces(args, 7)) await ev('response.function_call_arguments.delta', { item_id: itemId, output_index: output.length, delta: p })
    await ev('response.function_call_arguments.done', { item_id: itemId, output_index: output.length, arguments: args })
    const item = { ...base, arguments: args, status: 'completed' }
    await ev('response.output_item.done', { output_index: output.length, item })
    output.push(item)
  }
  const u = reply.usage ?? defaultUsage(index)
  const usage = { input_tokens: u.input, input_tokens_details: { cached_tokens: 0 }, output_tokens: u.output, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: u.input + u.output }
  if (reply.stop === 'max_tokens') {
    await ev('response.incomplete', { response: { ...response('incomplete', output, usage), incomplete_details: { reason: 'max_output_tokens' } } })
  } else {
    await ev('response.completed', { response: response('completed', output, usage) })
  }
  return { id, output }
}
