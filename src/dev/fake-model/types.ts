// The words shared by the fake model's server and its per-API writers.
import type http from 'node:http'

/** The model APIs the fake speaks: Anthropic Messages, OpenAI Chat Completions, OpenAI Responses, Gemini generateContent. */
export const WIRE_APIS = ['anthropic', 'openai', 'openai-responses', 'gemini'] as const
export type WireFormat = (typeof WIRE_APIS)[number]

export interface ScriptedTool {
  name: string
  input: Record<string, unknown>
}

export interface ScriptedReply {
  thinking?: string
  text?: string
  tools?: ScriptedTool[]
  stop?: 'end_turn' | 'tool_use' | 'max_tokens'
  usage?: { input: number; output: number }
  /** Answer with this HTTP status (and the API's own error body, or `errorBody`) instead of a stream. */
  status?: number
  errorBody?: unknown
  /** With an error status: the `Retry-After` header, in seconds. */
  retryAfter?: number
  /** Start the stream, then drop the connection after a few events, without the stream's end. */
  cut?: boolean
}

export interface SeenModelRequest {
  path: string
  headers: http.IncomingHttpHeaders
  body: any
  /** Which API the request spoke, and whether it came over a WebSocket. */
  api: WireFormat
  transport: 'http' | 'websocket'
}

export interface ScriptContext {
  api: WireFormat
  /** The model named by the request (Gemini names it in the path). */
  model: string
  transport: 'http' | 'websocket'
}

/** The model's side of a conversation: the request body (in its API's format), its index and context → a reply. */
export type Script = (body: any, index: number, ctx: ScriptContext) => ScriptedReply

export const defaultUsage = (index: number): { input: number; output: number } => ({ input: 100 + index, output: 20 })

export function toolCount(reply: ScriptedReply): number {
  return (reply.tools ?? []).length
}
