// The conversation as the agent keeps it, independent of the provider's wire format. Blocks follow
// the Anthropic Messages shape (the richer of the two); the OpenAI-compatible client converts.
import type { ThinkingEffort } from '../contract/index.js'
import { PROVIDER_KINDS, type ProviderKind } from '../contract/resources.js'

export type Block =
  | { type: 'text'; text: string }
  | { type: 'thinking'; thinking: string; signature?: string }
  | { type: 'redacted_thinking'; data: string }
  | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> }
  | { type: 'tool_result'; tool_use_id: string; content: string; is_error?: boolean }

export interface Message {
  role: 'user' | 'assistant'
  content: Block[]
}

export interface ToolSpec {
  name: string
  description: string
  input_schema: Record<string, unknown>
}

export interface TurnRequest {
  system: string
  messages: Message[]
  tools: ToolSpec[]
  thinking: ThinkingEffort
  maxTokens: number
}

export type StopReason = 'end_turn' | 'tool_use' | 'max_tokens' | 'stop_sequence' | 'refusal' | 'other'

export interface Usage {
  input_tokens: number
  output_tokens: number
}

export interface Turn {
  content: Block[]
  stopReason: StopReason
  usage: Usage
}

/** Streaming callbacks, for progress while a turn is still arriving. */
export interface TurnObserver {
  onTextDelta?(text: string): void
  onThinkingDelta?(text: string): void
}

export interface ModelClient {
  readonly provider: ProviderKind
  readonly model: string
  turn(request: TurnRequest, observer?: TurnObserver, signal?: AbortSignal): Promise<Turn>
}

export { PROVIDER_KINDS, type ProviderKind }

/** A provider answered with an error, or the stream broke; `retryable` for overload and 5xx. */
export class ModelError extends Error {
  constructor(message: string, readonly status: number | null, readonly retryable: boolean) {
    super(message)
    this.name = 'ModelError'
  }
}

/** Extended-thinking budgets per effort (Anthropic `budget_tokens`); `off` sends no thinking. */
export const THINKING_BUDGET: Record<ThinkingEffort, number> = { high: 16_000, medium: 8_000, low: 2_048, off: 0 }
