import { type Dispatcher, request } from 'undici'
import { type Block, type ModelClient, ModelError, type StopReason, THINKING_BUDGET, type Turn, type TurnObserver, type TurnRequest } from './model.js'
import { readSse } from './sse.js'

const API_VERSION = '2023-06-01'

export interface AnthropicOptions {
  baseUrl: string
  model: string
  dispatcher: Dispatcher
  /** Usually absent: the proxy's auth transform injects the key. */
  apiKey?: string
}

/**
 * Anthropic Messages API with `stream: true`: message_start, content_block_start / _delta
 * (text_delta, input_json_delta, thinking_delta, signature_delta) / _stop, message_delta (stop
 * reason, cumulative output usage), message_stop; `error` events and pings in between.
 */
export class AnthropicClient implements ModelClient {
  readonly provider = 'anthropic' as const
  readonly model: string
  readonly #opts: AnthropicOptions

  constructor(opts: AnthropicOptions) {
    this.#opts = opts
    this.model = opts.model
  }

  async turn(req: TurnRequest, observer?: TurnObserver, signal?: AbortSignal): Promise<Turn> {
    const budget = THINKING_BUDGET[req.thinking]
    const body: Record<string, unknown> = {
      model: this.model,
      max_tokens: req.maxTokens + budget,
      system: req.system,
      messages: req.messages,
      tools: req.tools,
      stream: true,
    }
    if (budget > 0) body.thinking = { type: 'enabled', budget_tokens: budget }
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'text/event-stream',
      'anthropic-version': API_VERSION,
    }
    if (this.#opts.apiKey) headers['x-api-key'] = this.#opts.apiKey
    const res = await request(`${this.#opts.baseUrl.replace(/\/+$/, '')}/v1/messages`, {
      method: 'POST', headers, body: JSON.stringify(body), dispatcher: this.#opts.dispatcher, signal,
    })
    if (res.statusCode !== 200) {
      const text = (await res.body.text()).slice(0, 500)
      throw new ModelError(`anthropic answered ${res.statusCode}: ${text}`, res.statusCode, res.statusCode === 429 || res.statusCode >= 500)
    }
    return parseStream(readSse(res.body), observer)
  }
}

interface Building {
  block: Block
  json: string
}

async function parseStream(events: AsyncIterable<{ event?: string; data: string }>, observer?: TurnObserver): Promise<Turn> {
  const blocks = new Map<number, Building>()
  let stopReason: StopReason = 'other'
  const usage = { input_tokens: 0, output_tokens: 0 }
  let stopped = false
  for await (const e of events) {
    let data: any
    try {
      data = JSON.parse(e.data)
    } catch {
      throw new ModelError(`anthropic stream: event ${e.event ?? '?'} is not JSON`, null, false)
    }
    switch (data.type) {
      case 'message_start':
        usage.input_tokens = data.message?.usage?.input_tokens ?? 0
        usage.output_tokens = data.message?.usage?.output_tokens ?? 0
        break
      case 'content_block_start': {
        const cb = data.content_block
        const block: Block = cb.type === 'tool_use' ? { type: 'tool_use', id: cb.id, name: cb.name, input: {} }
          : cb.type === 'thinking' ? { type: 'thinking', thinking: cb.thinking ?? '' }
          : cb.type === 'redacted_thinking' ? { type: 'redacted_thinking', data: cb.data ?? '' }
          : { type: 'text', text: cb.text ?? '' }
        blocks.set(data.index, { block, json: '' })
        break
      }
      case 'content_block_delta': {
        const b = blocks.get(data.index)
        if (!b) throw new ModelError(`anthropic stream: delta for unknown block ${data.index}`, null, false)
        const d = data.delta
        if (d.type === 'text_delta' && b.block.type === 'text') {
          b.block.text += d.text
          observer?.onTextDelta?.(d.text)
        } else if (d.type === 'thinking_delta' && b.block.type === 'thinking') {
          b.block.thinking += d.thinking
          observer?.onThinkingDelta?.(d.thinking)
        } else if (d.type === 'signature_delta' && b.block.type === 'thinking') {
          b.block.signature = (b.block.signature ?? '') + d.signature
        } else if (d.type === 'input_json_delta') {
          b.json += d.partial_json
        }
        break
      }
      case 'content_block_stop': {
        const b = blocks.get(data.index)
        if (b?.block.type === 'tool_use' && b.json.trim() !== '') {
          try {
            b.block.input = JSON.parse(b.json)
          } catch {
            throw new ModelError(`anthropic stream: tool input for ${b.block.name} is not JSON`, null, false)
          }
        }
        break
      }
      case 'message_delta':
        if (data.delta?.stop_reason) stopReason = mapStop(data.delta.stop_reason)
        // message_delta usage is cumulative for the message.
        if (typeof data.usage?.output_tokens === 'number') usage.output_tokens = data.usage.output_tokens
        if (typeof data.usage?.input_tokens === 'number') usage.input_tokens = data.usage.input_tokens
        break
      case 'message_stop':
        stopped = true
        break
      case 'error':
        throw new ModelError(`anthropic stream error: ${data.error?.type ?? 'error'}: ${data.error?.message ?? ''}`, null, data.error?.type === 'overloaded_error')
      default:
        break // ping and future event types
    }
  }
  if (!stopped) throw new ModelError('anthropic stream ended before message_stop', null, true)
  const content = [...blocks.entries()].sort(([a], [b]) => a - b).map(([, b]) => b.block)
  return { content, stopReason, usage }
}

function mapStop(reason: string): StopReason {
  return (['end_turn', 'tool_use', 'max_tokens', 'stop_sequence', 'refusal'] as const).find((r) => r === reason) ?? 'other'
}
