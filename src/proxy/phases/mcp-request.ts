// Phase request_body, MCP step: when the matched allow rule's destination is an MCP server
// (its `mcp` block), a POST body is read and parsed as JSON-RPC, and every message in it is decided
// by the server policy (tools by name and arguments, resources by URI, prompts by name, other
// methods by name or the default). One refused message refuses the whole body: nothing of it is
// forwarded, and the agent gets a JSON-RPC error for each of its requests (HTTP 200, as a server
// answers a request it will not run), or HTTP 400 when the body holds no request (MCP's streamable
// HTTP transport). GET (the server's event stream) and DELETE (the end of a session) carry no
// message and pass; their responses are still filtered (mcp-response.ts). docs/proxy.md "MCP".
import { parseRpcBody, rpcError, type McpServerPolicy, type McpVerdict, type RpcMessage } from '../../policy/index.js'
import { DENY_MESSAGES, PolicyDenial, type PhaseOutcome } from '../decision.js'
import { andThen } from '../maybe.js'
import { emitBatchRows } from './mcp-rows.js'
import type { PhaseResult } from '../phase.js'
import type { ProxyCore, RequestState } from '../request-state.js'
import { readBody } from './request-body.js'

/** A JSON-RPC error code in the server range for a policy refusal; -32602 (invalid params) for arguments. */
const POLICY_DENIED = -32001
const INVALID_PARAMS = -32602
const NAME_MAX = 256
const BODYLESS = new Set(['GET', 'DELETE'])
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

function hasBody(st: RequestState): boolean {
  const h = st.req.headers
  return (h['content-length'] !== undefined && h['content-length'] !== '0') || h['transfer-encoding'] !== undefined
}

export function mcpRequest(core: ProxyCore, st: RequestState): PhaseResult {
  const admission = st.admission
  if (admission?.decision !== 'allow' || st.workspace?.policy.kind !== 'ok') return undefined
  const server = st.workspace.policy.policy.mcp(admission.match)
  if (!server) return undefined
  st.mcp = { server, batchRows: [], tools: [] }
  st.ctx.detail.mcp_server = server.server
  // The response is read by the filter: it must come unencoded.
  st.headers['accept-encoding'] = 'identity'
  if (st.ctx.method !== 'POST') {
    // GET (the event stream) and DELETE (the session's end) carry no message: a body on one, or
    // another method, would reach the server unread.
    if (!BODYLESS.has(st.ctx.method)) return refuseBody(st, 'format_mismatch', 405, -32600, `${st.ctx.method} is not a method of MCP's streamable HTTP transport (POST, GET, DELETE)`)
    if (hasBody(st)) return refuseBody(st, 'format_mismatch', 400, -32600, `an MCP ${st.ctx.method} carries no body`)
    return undefined
  }
  const type = contentType(st.req.headers['content-type'])
  if (type !== 'application/json') {
    return refuseBody(st, 'format_mismatch', 415, -32600, `an MCP message must be sent as application/json (charset utf-8), not ${JSON.stringify((type ?? 'none').slice(0, 80))}`)
  }
  // The proxy reads the bytes as they are: an encoded body would be decided as one thing and run as another.
  const encoding = (st.req.headers['content-encoding'] ?? '').trim().toLowerCase()
  if (encoding !== '' && encoding !== 'identity') return refuseBody(st, 'format_mismatch', 415, -32600, `an MCP message must not be sent with Content-Encoding ${JSON.stringify(encoding.slice(0, 40))}`)
  if (st.body) return decide(core, st, server, st.body)
  return andThen(readBody(st.req, core.maxInspectBytes), (read) => {
    if (read === 'too_large') return refuseBody(st, 'limit_exceeded', 413, -32600, `an MCP message body over ${core.maxInspectBytes} bytes cannot be inspected`, { limit: 'mcp_body_bytes', max: core.maxInspectBytes })
    st.body = read
    st.requestBytes = read.length
    return decide(core, st, server, read)
  })
}

/** The batch's other rows, written (durable) just before it is forwarded. */
export function mcpBatchRows(core: ProxyCore, st: RequestState): PhaseResult {
  const rows = st.mcp?.batchRows
  if (!rows?.length) return undefined
  return emitBatchRows(core, st.ctx, rows.map((fields) => ({ fields })))
}

function decide(core: ProxyCore, st: RequestState, server: McpServerPolicy, body: Buffer): PhaseResult {
  // Bytes that are not UTF-8 could read as one name here (with U+FFFD) and as another on the server.
  let text: string
  try {
    text = UTF8.decode(body)
  } catch {
    return refuseBody(st, 'invalid_json', 400, -32700, 'Parse error: the body is not valid UTF-8')
  }
  const parsed = parseRpcBody(text)
  if (!parsed.ok) return refuseBody(st, parsed.reason, 400, parsed.code, parsed.message)
  const { messages, batch } = parsed
  const verdicts = messages.map((m): McpVerdict | undefined => (m.kind === 'response' ? undefined : server.decide(m, st.policyContext!)))
  const fields = messages.map((m, i) => rowFields(server, m, verdicts[i], batch ? { n: messages.length, i } : undefined, st.ctx.match?.ruleKey))
  const refusedAt = verdicts.findIndex((v) => v !== undefined && !v.allow)
  if (refusedAt < 0) {
    st.ctx.callDetail = fields[0]
    st.mcp!.batchRows = fields.slice(1)
    st.mcp!.replyFor = (d) => laterReply(messages, batch, d)
    for (const v of verdicts) if (v?.tool !== undefined) st.mcp!.tools.push(v.tool)
    return undefined
  }
  const first = verdicts[refusedAt]!
  const reason = first.reason ?? 'no_match'
  const denial = new PolicyDenial(reason, { ...fields[0], ...(refusedAt > 0 ? { mcp_refused_index: refusedAt, mcp_batch_refused: true } : {}) }, 403, reply(messages, verdicts, batch, first))
  // Every message of a refused body gets its row (deny: none was forwarded); the first's is the request's own.
  const others = fields.slice(1).map((f, j) => ({ fields: { ...f, ...(verdicts[j + 1]?.allow !== false && j + 1 !== refusedAt ? { mcp_batch_refused: true } : {}) }, reason: verdicts[j + 1]?.reason ?? reason }))
  if (others.length === 0) return denial
  return andThen(emitBatchRows(core, st.ctx, others), (failed) => failed ?? denial)
}

/** The agent's answer: a JSON-RPC error per request (HTTP 200), or HTTP 400 when the body has no request. */
function reply(messages: RpcMessage[], verdicts: (McpVerdict | undefined)[], batch: boolean, first: McpVerdict): PolicyDenial['reply'] {
  const errors: Record<string, unknown>[] = []
  messages.forEach((m, i) => {
    if (m.kind !== 'request') return
    const v = verdicts[i]!
    errors.push(v.allow ? rpcError(m.id, POLICY_DENIED, 'Not forwarded: another message in this batch was refused by the corral policy.') : errorFor(m.id, v))
  })
  if (errors.length === 0) return { status: 400, contentType: 'application/json', body: JSON.stringify(errorFor(null, first)) }
  return { status: 200, contentType: 'application/json', body: JSON.stringify(batch ? errors : errors[0]) }
}

/**
 * A refusal after the messages were allowed (a budget, the proxy's limits, an unreachable
 * destination) answered to each request as a JSON-RPC error; transient refusals (the audit log or
 * the store away, a fault) keep their HTTP status so that a client retries.
 */
function laterReply(messages: RpcMessage[], batch: boolean, d: PolicyDenial): PolicyDenial['reply'] {
  if (d.status >= 500 || d.status === 407) return undefined
  const ids = messages.flatMap((m) => (m.kind === 'request' ? [m.id] : []))
  if (ids.length === 0) return undefined
  const errors = ids.map((id) => rpcError(id, POLICY_DENIED, `Denied by corral policy (${d.reason}): ${DENY_MESSAGES[d.reason]}`, { reason: d.reason, ...(typeof d.detail.counter === 'string' ? { counter: d.detail.counter } : {}) }))
  return { status: 200, contentType: 'application/json', body: JSON.stringify(batch ? errors : errors[0]) }
}

function errorFor(id: string | number | null, v: McpVerdict): Record<string, unknown> {
  const code = v.reason === 'schema_violation' ? INVALID_PARAMS : POLICY_DENIED
  return rpcError(id, code, `Denied by corral policy (${v.reason ?? 'no_match'}): ${v.message ?? 'not allowed'}`, {
    reason: v.reason ?? 'no_match',
    ...(v.errors ? { errors: v.errors } : {}),
  })
}

/** A body refused before any message could be decided: one JSON-RPC error with no id. */
function refuseBody(st: RequestState, reason: 'format_mismatch' | 'invalid_json' | 'schema_violation' | 'limit_exceeded', status: number, code: number, message: string, extra: Record<string, unknown> = {}): PhaseOutcome {
  const body = JSON.stringify(rpcError(null, code, `Denied by corral policy (${reason}): ${message}`, { reason }))
  return new PolicyDenial(reason, { mcp_server: st.mcp!.server.server, message, ...extra }, status, { status, contentType: 'application/json', body })
}

/** One message's fields in its decision row (names and ids only, never argument values). */
function rowFields(server: McpServerPolicy, m: RpcMessage, v: McpVerdict | undefined, batch: { n: number; i: number } | undefined, ruleKey: string | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = { mcp_server: server.server, mcp_kind: m.kind }
  if (m.kind !== 'response') out.mcp_method = m.method.slice(0, NAME_MAX)
  if (m.kind !== 'notification') out.mcp_id = typeof m.id === 'string' ? m.id.slice(0, NAME_MAX) : m.id
  if (v?.tool !== undefined) out.mcp_tool = v.tool.slice(0, NAME_MAX)
  if (v?.resource !== undefined) out.mcp_resource = v.resource.slice(0, NAME_MAX)
  if (v?.prompt !== undefined) out.mcp_prompt = v.prompt.slice(0, NAME_MAX)
  if (ruleKey) out.rule = ruleKey
  out.mcp_rule = v?.rule ?? 'response'
  if (v && !v.allow) {
    if (v.message) out.message = v.message
    if (v.errors) out.errors = v.errors
  }
  if (batch) {
    out.mcp_batch = batch.n
    out.mcp_batch_index = batch.i
  }
  return out
}

function contentType(v: string | undefined): string | undefined {
  if (!v) return undefined
  const [type, ...params] = v.split(';').map((s) => s.trim().toLowerCase())
  for (const p of params) if (p.startsWith('charset=') && !/^charset="?utf-8"?$/.test(p)) return `${type}; ${p}`
  return type
}
