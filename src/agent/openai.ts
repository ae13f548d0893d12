import { type Dispatcher, request } from 'undici'
import { type Block, type Message, type ModelClient, ModelError, type StopReason, type Turn, type TurnObserver, type TurnRequest } from './model.js'
import { readSse } from './sse.js'

export interface OpenAiOptions {
  /** Includes the version segment, e.g. https://api.openai.com/v1. */
  baseUrl: string
  model: string
  dispatcher: Dispatcher
  apiKey?: string
}

/**
 * OpenAI-compatible Chat Completions with `stream: true`: `data: {chunk}` lines whose
 * `choices[0].delta` carries content, tool_calls fragments (by index; id and name first, then
 * argument pieces) and, on some servers, `reasoning_content`; a final chunk with `usage` (asked for
 * with stream_options.include_usage); `data: [DONE]`.
 */
export class OpenAiClient implements ModelClient {
  readonly provider = 'openai' as const
  readonly model: string
  readonly #opts: OpenAiOptions

  constructor(opts: OpenAiOptions) {
    this.#opts = opts
    this.model = opts.model
  }

  async turn(req: TurnRequest, observer?: TurnObserver, signal?: AbortSignal): Promise<Turn> {
    const body: Record<string, unknown> = {
      model: this.model,
      messages: [{ role: 'system', content: req.system }, ...toChatMessages(req.messages)],
      tools: req.tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.input_schema } })),
      stream: true,
      stream_options: { include_usage: true },
      max_completion_tokens: req.maxTokens,
    }
    if (req.thinking !== 'off') body.reasoning_effort = req.thinking
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'text/event-stream' }
    if (this.#opts.apiKey) headers.authorization = `Bearer ${this.#opts.apiKey}`
    const res = await request(`${this.#opts.baseUrl.replace(/\/+$/, '')}/chat/completions`, {
      method: 'POST', headers, body: JSON.stringify(body), dispatcher: this.#opts.dispatcher, signal,
    })
    if (res.statusCode !== 200) {
      const text = (await res.body.text()).slice(0, 500)
      throw new ModelError(`openai-compatible provider answered ${res.statusCode}: ${text}`, res.statusCode, res.statusCode === 429 || res.statusCode >= 500)
    }
    return parseStream(readSse(res.body), observer)
  }
}

/** Neutral blocks → chat messages: tool results become `tool` messages, thinking is not sent back. */
export function toChatMessages(messages: Message[]): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = []
  for (const m of messages) {
    const text = m.content.filter((b): b is Extract<Block, { type: 'text' }> => b.type === 'text').map((b) => b.text).join('')
    if (m.role === 'assistant') {
      const calls = m.content.filter((b): b is Extract<Block, { type: 'tool_use' }> => b.type === 'tool_use')
      out.push({
        role: 'assistant',
        content: text === '' ? null : text,
        ...(calls.length > 0
          ? { tool_calls: calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: JSON.stringify(c.input) } })) }
          : {}),
      })
      continue
    }
    for (const b of m.content) {
      if (b.type === 'tool_result') out.push({ role: 'tool', tool_call_id: b.tool_use_id, content: b.content })
    }
    if (text !== '') out.push({ role: 'user', content: text })
  }
  return out
}

interface PartialCall {
  id: string
  name: string
  args: string
}

async function parseStream(events: AsyncIterable<{ data: string }>, observer?: TurnObserver): Promise<Turn> {
  let text = ''
  let thinking = ''
  const calls = new Map<number, PartialCall>()
  let finish: string | null = null
  const usage = { input_tokens: 0, output_tokens: 0 }
  let done = false
  for await (const e of events) {
    if (e.data.trim() === '[DONE]') {
      done = true
      break
    }
    let chunk: any
    try {
      chunk = JSON.parse(e.data)
    } catch {
      throw new ModelError('openai-compatible stream: chunk is not JSON', null, false)
    }
    if (chunk.error) throw new ModelError(`openai-compatible stream error: ${chunk.error.message ?? JSON.stringify(chunk.error)}`, null, false)
    if (chunk.usage) {
      usage.input_tokens = chunk.usage.prompt_tokens ?? usage.input_tokens
      usage.output_tokens = chunk.usage.completion_tokens ?? usage.output_tokens
    }
    const choice = chunk.choices?.[0]
    if (!choice) continue
    const delta = choice.delta ?? {}
    if (typeof delta.content === 'string' && delta.content !== '') {
      text += delta.content
      observer?.onTextDelta?.(delta.content)
    }
    const reasoning = delta.reasoning_content ?? delta.reasoning
    if (typeof reasoning === 'string' && reasoning !== '') {
      thinking += reasoning
      observer?.onThinkingDelta?.(reasoning)
    }
    for (const tc of delta.tool_calls ?? []) {
      const index = typeof tc.index === 'number' ? tc.index : calls.size
      const call = calls.get(index) ?? { id: '', name: '', args: '' }
      if (tc.id) call.id = tc.id
      if (tc.function?.name) call.name += tc.function.name
      if (tc.function?.arguments) call.args += tc.function.arguments
      calls.set(index, call)
    }
    if (choice.finish_reason) finish = choice.finish_reason
  }
  if (!done && finish === null) throw new ModelError('openai-compatible stream ended before [DONE]', null, true)
  const content: Block[] = []
  if (thinking !== '') content.push({ type: 'thinking', thinking })
  if (text !== '') content.push({ type: 'text', text })
  for (const [index, call] of [...calls.entries()].sort(([a], [b]) => a - b)) {
    let input: Record<string, unknown> = {}
    if (call.args.trim() !== '') {
      try {
        input = JSON.parse(call.args)
      } catch {
        throw new ModelError(`openai-compatible stream: arguments of ${call.name} are not JSON`, null, false)
      }
    }
    content.push({ type: 'tool_use', id: call.id || `call_${index}`, name: call.name, input })
  }
  const stopReason: StopReason = finish === 'tool_calls' || (finish === null && calls.size > 0) ? 'tool_use'
    : finish === 'stop' ? 'end_turn'
    : finish === 'length' ? 'max_tokens'
    : finish === 'content_filter' ? 'refusal'
    : calls.size > 0 ? 'tool_use' : 'end_turn'
  return { content, stopReason, usage }
}
