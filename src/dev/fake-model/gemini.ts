// Gemini, `POST /v1beta/models/{model}:streamGenerateContent?alt=sse` (server-sent `data:` events
// separated by CRLF pairs, each a GenerateContentResponse) and `:generateContent` (one of them).
// Text and thoughts stream in pieces; a function call arrives whole, as the API sends it; the last
// event carries finishReason and usageMetadata. Errors are `{error: {code, message, status}}`, a
// 429 with a RetryInfo detail. A request that asks for JSON (`responseMimeType:
// application/json` with a schema, as Gemini CLI's routing and next-speaker checks do) gets a
// value shaped by that schema.
import { pieces, type Channel } from './channel.js'
import { defaultUsage, toolCount, type ScriptedReply } from './types.js'

const STATUS_NAMES: Record<number, string> = {
  400: 'INVALID_ARGUMENT', 401: 'UNAUTHENTICATED', 403: 'PERMISSION_DENIED', 404: 'NOT_FOUND', 429: 'RESOURCE_EXHAUSTED', 500: 'INTERNAL', 503: 'UNAVAILABLE',
}

export function geminiError(status: number, message: string, retryAfter?: number): unknown {
  const details = status === 429 && retryAfter !== undefined ? [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: `${retryAfter}s` }] : undefined
  return { error: { code: status, message, status: STATUS_NAMES[status] ?? 'UNKNOWN', ...(details ? { details } : {}) } }
}

/** `models/{model}:{method}` from a path, or undefined. */
export function geminiRoute(pathname: string): { model: string; method: string } | undefined {
  const m = /^\/v1(?:beta|alpha|)\/models\/([^/:]+):([A-Za-z]+)$/.exec(pathname)
  return m ? { model: decodeURIComponent(m[1]!), method: m[2]! } : undefined
}

function usageMetadata(reply: ScriptedReply, index: number): unknown {
  const u = reply.usage ?? defaultUsage(index)
  return { promptTokenCount: u.input, candidatesTokenCount: u.output, totalTokenCount: u.input + u.output, promptTokensDetails: [{ modality: 'TEXT', tokenCount: u.input }] }
}

function finishReason(reply: ScriptedReply): string {
  return reply.stop === 'max_tokens' ? 'MAX_TOKENS' : 'STOP'
}

function chunk(parts: unknown[], model: string, index: number, last?: { reply: ScriptedReply }): unknown {
  const candidate = { content: { parts, role: 'model' }, index: 0, ...(last ? { finishReason: finishReason(last.reply) } : {}) }
  return { candidates: [candidate], ...(last ? { usageMetadata: usageMetadata(last.reply, index) } : {}), modelVersion: model, responseId: `fake-${index}` }
}

function callParts(reply: ScriptedReply, index: number): unknown[] {
  return (reply.tools ?? []).map((tool, n) => ({ functionCall: { id: `call_${index}_${n}`, name: tool.name, args: tool.input }, thoughtSignature: `sig-${index}-${n}` }))
}

export async function writeGeminiStream(ch: Channel, reply: ScriptedReply, index: number, model: string): Promise<void> {
  if (reply.thinking !== undefined) for (const p of pieces(reply.thinking, 8)) await ch.event(null, chunk([{ text: p, thought: true }], model, index))
  const texts = reply.text !== undefined ? pieces(reply.text, 6) : []
  const calls = callParts(reply, index)
  // The last text piece and the calls travel with the finish reason, as the API sends its last event.
  for (const p of texts.slice(0, toolCount(reply) > 0 ? texts.length : -1)) await ch.event(null, chunk([{ text: p }], model, index))
  const tail = toolCount(reply) > 0 ? calls : texts.slice(-1).map((text) => ({ text }))
  await ch.event(null, chunk(tail.length > 0 ? tail : [{ text: '' }], model, index, { reply }))
}

export function geminiResponse(reply: ScriptedReply, index: number, model: string): unknown {
  const parts: unknown[] = []
  if (reply.thinking !== undefined) parts.push({ text: reply.thinking, thought: true })
  if (reply.text !== undefined) parts.push({ text: reply.text })
  parts.push(...callParts(reply, index))
  return chunk(parts.length > 0 ? parts : [{ text: '' }], model, index, { reply })
}

export function geminiCount(body: unknown): unknown {
  return { totalTokens: Math.max(1, Math.ceil(JSON.stringify(body ?? {}).length / 4)) }
}

/** The JSON schema a request asks its answer to follow, when it asks for JSON. */
export function requestedSchema(body: any): unknown {
  const config = body?.generationConfig ?? {}
  if (config.responseMimeType !== 'application/json') return undefined
  return config.responseJsonSchema ?? config.responseSchema ?? {}
}

/** A small value that satisfies a (Gemini-flavoured, upper-case types allowed) JSON schema. */
export function valueFor(schema: any, depth = 0): unknown {
  if (!schema || typeof schema !== 'object' || depth > 8) return null
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0]
  const choice = schema.anyOf ?? schema.oneOf
  if (Array.isArray(choice) && choice.length > 0) return valueFor(choice[0], depth + 1)
  const type = String(Array.isArray(schema.type) ? schema.type[0] : (schema.type ?? (schema.properties ? 'object' : 'string'))).toLowerCase()
  switch (type) {
    case 'object': {
      const out: Record<string, unknown> = {}
      for (const [key, sub] of Object.entries(schema.properties ?? {})) out[key] = valueFor(sub, depth + 1)
      return out
    }
    case 'array':
      return schema.minItems > 0 ? [valueFor(schema.items, depth + 1)] : []
    case 'integer':
    case 'number':
      return typeof schema.minimum === 'number' ? schema.minimum : 1
    case 'boolean':
      return false
    case 'null':
      return null
    default:
      return 'scripted by the fake model'
  }
}
