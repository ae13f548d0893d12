// JSON-RPC 2.0 as MCP's streamable HTTP carries it: the messages of one POST body (one message
// or a batch), strictly parsed. A body the proxy cannot read the way the server will is refused:
// not JSON, a duplicate key anywhere (parsers disagree on which one wins: the proxy could check
// one tool name and the server call another), or a message that is not JSON-RPC 2.0.

/** One message of a body, classified. */
export type RpcMessage =
  | { kind: 'request'; id: string | number; method: string; params: unknown }
  | { kind: 'notification'; method: string; params: unknown }
  | { kind: 'response'; id: string | number | null }

export type ParsedBody = { ok: true; batch: boolean; messages: RpcMessage[] } | { ok: false; code: number; message: string; reason: 'invalid_json' | 'schema_violation' }

/** The most messages one batch may hold. */
export const MAX_BATCH = 100

/** Parses a POST body into JSON-RPC messages, or says why it cannot be forwarded. */
export function parseRpcBody(text: string): ParsedBody {
  const value = parseStrictJson(text)
  if (!value.ok) return { ok: false, code: -32700, message: `Parse error: ${value.message}`, reason: 'invalid_json' }
  const batch = Array.isArray(value.value)
  const items: unknown[] = batch ? (value.value as unknown[]) : [value.value]
  if (items.length === 0) return { ok: false, code: -32600, message: 'Invalid Request: an empty batch', reason: 'schema_violation' }
  // Each message has its decision row: a batch is bounded like any other per-request work.
  if (items.length > MAX_BATCH) return { ok: false, code: -32600, message: `Invalid Request: a batch of more than ${MAX_BATCH} messages`, reason: 'schema_violation' }
  const messages: RpcMessage[] = []
  const ids = new Set<string>()
  for (const item of items) {
    const m = classify(item)
    if (!m) return { ok: false, code: -32600, message: 'Invalid Request: not a JSON-RPC 2.0 message', reason: 'schema_violation' }
    if (m.kind === 'request') {
      // Two requests with one id: their answers could not be told apart (nor filtered by method).
      const key = idKey(m.id)
      if (ids.has(key)) return { ok: false, code: -32600, message: 'Invalid Request: two requests in one batch share an id', reason: 'schema_violation' }
      ids.add(key)
    }
    messages.push(m)
  }
  return { ok: true, batch, messages }
}

/** A map key for a JSON-RPC id that keeps 1 and "1" apart. */
export function idKey(id: unknown): string {
  return typeof id === 'number' ? `n:${id}` : `s:${String(id)}`
}

function classify(v: unknown): RpcMessage | undefined {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return undefined
  const o = v as Record<string, unknown>
  if (o.jsonrpc !== '2.0') return undefined
  const hasId = Object.hasOwn(o, 'id')
  const id = o.id
  const validId = typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id))
  if (Object.hasOwn(o, 'method')) {
    if (typeof o.method !== 'string' || Object.hasOwn(o, 'result') || Object.hasOwn(o, 'error')) return undefined
    if (!hasId) return { kind: 'notification', method: o.method, params: o.params }
    return validId ? { kind: 'request', id: id as string | number, method: o.method, params: o.params } : undefined
  }
  if (!hasId || Object.hasOwn(o, 'result') === Object.hasOwn(o, 'error')) return undefined
  return validId || id === null ? { kind: 'response', id: id as string | number | null } : undefined
}

/** JSON.parse plus a refusal of duplicate keys (compared after unescaping, so "n\u0061me" is "name"). */
export function parseStrictJson(text: string): { ok: true; value: unknown } | { ok: false; message: string } {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (e) {
    return { ok: false, message: (e instanceof Error ? e.message : String(e)).split('\n')[0].slice(0, 120) }
  }
  const dup = duplicateKey(text)
  return dup === undefined ? { ok: true, value } : { ok: false, message: `duplicate key ${JSON.stringify(dup.slice(0, 64))}` }
}

/**
 * The first key that appears twice in one object of a text JSON.parse accepted, else undefined.
 * One pass: a stack of the keys seen per open object (null for an array).
 */
function duplicateKey(text: string): string | undefined {
  const stack: (Set<string> | null)[] = []
  const n = text.length
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x7b /* { */) stack.push(new Set())
    else if (c === 0x5b /* [ */) stack.push(null)
    else if (c === 0x7d /* } */ || c === 0x5d /* ] */) stack.pop()
    else if (c === 0x22 /* " */) {
      const start = i
      for (i++; i < n; i++) {
        const d = text.charCodeAt(i)
        if (d === 0x5c /* \ */) i++
        else if (d === 0x22) break
      }
      const top = stack[stack.length - 1]
      if (!top) continue
      let j = i + 1
      while (j < n && (text[j] === ' ' || text[j] === '\t' || text[j] === '\n' || text[j] === '\r')) j++
      if (text[j] !== ':') continue
      const raw = text.slice(start, i + 1)
      const key = raw.includes('\\') ? (JSON.parse(raw) as string) : raw.slice(1, -1)
      if (top.has(key)) return key
      top.add(key)
    }
  }
  return undefined
}

/** A JSON-RPC error object for a request id (null when the message had none or could not be read). */
export function rpcError(id: string | number | null, code: number, message: string, data?: Record<string, unknown>): Record<string, unknown> {
  return { jsonrpc: '2.0', id, error: { code, message, ...(data ? { data } : {}) } }
}
