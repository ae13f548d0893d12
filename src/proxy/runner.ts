// The phase runner: owns the order of the phases (phase.ts), stops at the first
// denial, turns thrown faults into `internal_error` (admission) or an upstream failure
// (forwarding), and always ends in the terminal phase, which writes the request's one
// policy_decision row.
import type { IncomingMessage, ServerResponse } from 'node:http'
import { isStoreUnavailable } from '../store/index.js'
import { CONTROL_HOST } from '../contract/index.js'
import { serveAgentCallback } from './agent-callbacks.js'
import { DecisionContext, attributeToken, deny, denyBody, type PolicyDenial } from './decision.js'
import { andThen, type MaybePromise } from './maybe.js'
import { runPhases, type PhaseStep } from './phase.js'
import { isGrpc, noteGrpcDeny, sendGrpcDeny } from './grpc.js'
import { forwardGate } from './phases/forward-gate.js'
import { mcpBatchRows, mcpRequest } from './phases/mcp-request.js'
import { mcpResponse } from './phases/mcp-response.js'
import { requestBody, reserveBudgets } from './phases/request-body.js'
import { requestHeaders, workspaceLimits } from './phases/request-headers.js'
import { responseBody } from './phases/response-body.js'
import { responseHeaders } from './phases/response-headers.js'
import { terminal, type TerminalOutcome } from './phases/terminal.js'
import { transforms } from './phases/transforms.js'
import { upstream } from './phases/upstream.js'
import { newRequestState, type Entry, type ProxyCore, type RequestState } from './request-state.js'
import { PROXY_CHALLENGE, requestToken } from './token.js'
import { HOP_BY_HOP } from './upstream.js'

/** Admission: each phase may deny with a local reply; nothing has left the proxy yet. */
const ADMISSION: readonly PhaseStep[] = [
  { phase: 'request_headers', name: 'request-headers', run: requestHeaders },
  { phase: 'request_headers', name: 'workspace-limits', run: workspaceLimits },
  { phase: 'request_body', name: 'request-body', run: requestBody },
  { phase: 'request_body', name: 'mcp-request', run: mcpRequest },
  { phase: 'request_body', name: 'budgets', run: reserveBudgets },
  { phase: 'request_body', name: 'transforms', run: transforms },
  { phase: 'request_body', name: 'forward-gate', run: forwardGate },
  { phase: 'request_body', name: 'mcp-batch-rows', run: mcpBatchRows },
]

/** Forwarding: from the first byte sent upstream. A throw here is an upstream or client failure, not internal_error. */
const FORWARDING: readonly PhaseStep[] = [
  { phase: 'request_body', name: 'upstream', run: upstream },
  { phase: 'response_headers', name: 'mcp-response', run: mcpResponse },
  { phase: 'response_headers', name: 'response-headers', run: responseHeaders },
  { phase: 'response_body', name: 'response-body', run: responseBody },
]

/**
 * Runs one request through the phases. `preDenial` is the front's verdict for a request that did
 * not come through it properly (no_scheme) or uses a refused method; it is still attributed from
 * its token when that verifies. A deny's row is handed to the sink before the deny is sent; an
 * allow's row is written at the end of its relayed response. Never rejects for a fault of the
 * phases (internal_error); the front's error boundary handles the rest.
 */
export async function runRequest(core: ProxyCore, req: IncomingMessage, res: ServerResponse, entry: Entry, path: string, preDenial?: PolicyDenial, protocol?: 'h2'): Promise<void> {
  // The second door: agent callbacks to the control plane, answered after the token check by the
  // handler the proxy was built with (agent-callbacks.ts); never the phases.
  if (!preDenial && entry.host === CONTROL_HOST && (await serveAgentCallback(core, req, res, entry, path))) return
  const ctx = new DecisionContext({ destination: entry.host, method: (req.method ?? 'GET').toUpperCase(), path })
  if (protocol) ctx.protocol = protocol
  const st = newRequestState(req, res, entry, ctx, forwardableHeaders(req))
  // 'close' comes once, and abort() is idempotent: `on` spares once's wrapper.
  res.on('close', () => {
    if (!res.writableFinished) st.abort.abort()
  })
  let denial: PolicyDenial | undefined
  try {
    // Admission usually answers without a promise: awaiting only a promise spares the turn.
    const admitted = preDenial ? attributeOnly(core, st, preDenial) : runPhases(core, st, ADMISSION)
    denial = admitted instanceof Promise ? await admitted : admitted
  } catch (err) {
    // A throw is a fault of the proxy: internal_error, never silence.
    denial = internalError(core, err)
  }
  if (denial) {
    // The row first, then the answer: a client never holds a deny that the log does not.
    ctx.denial = denial
    if (isGrpc(req)) noteGrpcDeny(ctx, denial)
    sendDeny(st, refusal(await recordDeny(core, st)) ?? denial)
    return
  }
  // The allow's row is recorded when the upstream body has ended, before the client's response
  // is ended (response-body.ts). A row the log refused outright cuts the response; one it could
  // not make durable in time but keeps (written when the disk or database is back) completes it:
  // the upstream has answered, and the client must not be told otherwise and retry a side effect.
  st.beforeEnd = recordAllow
  let failed = false
  try {
    try {
      // A denial here is the address check refusing the upstream connection (destination_private, src/net/).
      ctx.denial = await runPhases(core, st, FORWARDING)
    } catch (err) {
      failed = true
      if (st.bodyLimitHit) ctx.denial = deny('limit_exceeded', { limit: 'body_bytes', max: core.limits.maxBodyBytes }, 413)
      else noteUpstreamFailure(st, err)
    }
    if (failed || ctx.denial) {
      if (ctx.denial && !ctx.emitted && !st.res.headersSent && isGrpc(req)) noteGrpcDeny(ctx, ctx.denial)
      const unrecorded = ctx.emitted ? undefined : refusal(await record(core, st))
      if (st.res.headersSent || st.abort.aborted) st.res.destroy()
      else if (unrecorded || ctx.denial) sendDeny(st, unrecorded ?? ctx.denial!)
      else sendUpstreamUnavailable(st)
    }
  } finally {
    if (!ctx.emitted) await record(core, st)
  }
}

/**
 * Releases the request's holds and records its row. Returns undefined when the row is recorded,
 * else the `audit_unavailable` denial to answer with instead (nothing more may leave).
 */
function record(core: ProxyCore, st: RequestState): Promise<PolicyDenial | undefined> {
  return recordRow(core, st).then(rowOutcome)
}

/** st.beforeEnd of an allow: its row recorded (or kept by the log to be written later); false when it was refused. */
function recordAllow(core: ProxyCore, st: RequestState): Promise<boolean> {
  return recordRow(core, st).then(rowKeptOrRecorded)
}

/** Releases the request's holds, then emits its row (terminal.ts). */
function recordRow(core: ProxyCore, st: RequestState): Promise<TerminalOutcome> {
  // The row is still written when settling fails (exactly one per request); the budgets module
  // reports its own state. Without a debit owed to the ledger, release answers at once and the
  // row goes out in this turn.
  let released: MaybePromise<void> = undefined
  try {
    released = release(core, st)
  } catch (err) {
    settleFailed(core, err)
  }
  if (released instanceof Promise) return released.catch((err: unknown) => settleFailed(core, err)).then(() => terminal(core, st.ctx))
  return terminal(core, st.ctx)
}

function settleFailed(core: ProxyCore, err: unknown): void {
  core.log.error({ err: { message: (err as Error)?.message ?? String(err) } }, 'proxy: settling the request budgets failed')
}

const rowKeptOrRecorded = (out: TerminalOutcome): boolean => out.recorded || out.kept

function rowOutcome(out: TerminalOutcome): PolicyDenial | undefined {
  return out.recorded ? undefined : deny('audit_unavailable', { retry_after_s: out.retryAfterS, ...(out.kept ? { kept: true } : {}) }, 503)
}

/**
 * A denial's row, like record(); a 407 challenge's row is rate limited like a bare CONNECT's
 * (row-allowance.ts): when it is only counted, the challenge is answered without a row. A
 * challenge comes from the token check, before a workspace slot or budget hold is taken.
 */
function recordDeny(core: ProxyCore, st: RequestState): Promise<PolicyDenial | undefined> {
  const d = st.ctx.denial!
  if (d.status === 407) {
    const suppressed = core.challengeRows.take()
    if (suppressed === undefined) return Promise.resolve(undefined)
    if (suppressed) st.ctx.denial = deny(d.reason, { ...d.detail, suppressed }, d.status)
  }
  return record(core, st)
}

/** The answer a row's refusal imposes: none when it was recorded or is kept to be written later. */
function refusal(unrecorded: PolicyDenial | undefined): PolicyDenial | undefined {
  return unrecorded?.detail.kept === true ? undefined : unrecorded
}

function internalError(core: ProxyCore, err: unknown): PolicyDenial {
  // The store is away (PostgreSQL restarting, SQLite locked or full): a transient fault, answered
  // 503 with Retry-After like the API does, logged once per burst instead of once per request.
  if (isStoreUnavailable(err)) {
    core.counters.storeUnavailable++
    const now = Date.now()
    if (now - (lastStoreWarn.get(core) ?? 0) > 5_000) {
      lastStoreWarn.set(core, now)
      core.log.warn({ err: { message: (err as Error)?.message ?? String(err), code: (err as { code?: string })?.code }, count: core.counters.storeUnavailable }, 'proxy: the store is unavailable; requests are answered 503 until it is back')
    }
    return deny('internal_error', { store_unavailable: true, retry_after_s: STORE_RETRY_S }, 503)
  }
  const e = err as { message?: string; stack?: string }
  core.log.error({ err: { message: e?.message ?? String(err), stack: e?.stack } }, 'proxy: a phase failed (internal_error)')
  return deny('internal_error', {}, 500)
}

const STORE_RETRY_S = 2
const lastStoreWarn = new WeakMap<ProxyCore, number>()

/**
 * Once per request: the workspace's in-flight slot and the budget holds or debits (durable before
 * the row). A promise only when a debit must reach the ledger first; may throw.
 */
function release(core: ProxyCore, st: RequestState): MaybePromise<void> {
  if (st.released) return undefined
  st.released = true
  if (st.workspace) st.workspace.inFlight--
  return settleBudgets(core, st)
}

/** Commits debits of an allowed request (durable before its row: budgets.ts), or returns the holds of a denied one. */
function settleBudgets(core: ProxyCore, st: RequestState): MaybePromise<void> {
  const r = st.reservation
  if (!r || !core.budgets) return undefined
  if (st.ctx.denial) {
    core.budgets.release(r)
    return undefined
  }
  return andThen(core.budgets.settle(r, st.meter!.values(st.requestBytes, st.mcp?.tools)), (s) => {
    st.ctx.debits = s.debits
    st.ctx.budgetState = s.budgetState
    st.ctx.floored = s.floored
  })
}

async function attributeOnly(core: ProxyCore, st: RequestState, denial: PolicyDenial): Promise<PolicyDenial> {
  const check = await requestToken(core.tokens, st.req, st.entry.tunnel)
  if (check.ok) attributeToken(st.ctx, check)
  return denial
}

/** Notes why the forward failed (the row's detail); the caller answers. */
function noteUpstreamFailure(st: RequestState, err: unknown): void {
  st.ctx.detail.upstream_error = upstreamCode(err)
  if (st.abort.aborted) st.ctx.detail.client_closed = true
}

function sendUpstreamUnavailable(st: RequestState): void {
  if (isGrpc(st.req)) return sendGrpcDeny(st.res, deny('internal_error', {}, 502))
  const body = JSON.stringify({ error: { code: 'upstream_unavailable', message: `The upstream could not be reached (${String(st.ctx.detail.upstream_error)}).` } })
  st.res.writeHead(502, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
  st.res.end(body)
}

/** A stable, non-sensitive code for an upstream error (no addresses, no provider text). */
function upstreamCode(err: unknown): string {
  const e = err as { code?: string; cause?: { code?: string } }
  const code = e?.cause?.code ?? e?.code ?? 'error'
  if (/CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS/.test(code)) return 'tls_verify_failed'
  if (code === 'ECONNREFUSED') return 'connection_refused'
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'dns_failed'
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') return 'timeout'
  if (code === 'UND_ERR_SOCKET' || code === 'ECONNRESET' || code === 'ERR_STREAM_PREMATURE_CLOSE') return 'connection_reset'
  return 'error'
}

function sendDeny(st: RequestState, denial: PolicyDenial): void {
  const { res, req } = st
  if (res.headersSent) {
    res.destroy()
    return
  }
  if (isGrpc(req)) return sendGrpcDeny(res, denial)
  const reply = denial.reply ?? st.mcp?.replyFor?.(denial)
  const body = reply?.body ?? denyBody(st.ctx, denial)
  const headers: Record<string, string | number> = {
    'content-type': reply?.contentType ?? 'application/json',
    'content-length': Buffer.byteLength(body),
    'x-corral-deny-reason': denial.reason,
    'cache-control': 'no-store',
  }
  // An unread request body cannot be skipped on a keep-alive connection without reading it all.
  // (HTTP/2 resets the one stream instead: a connection header is not allowed there.)
  if (!req.complete && req.httpVersionMajor < 2) headers.connection = 'close'
  // A 407 carries its challenge (token.ts): clients such as git then retry with the token.
  if (denial.status === 407) headers['proxy-authenticate'] = PROXY_CHALLENGE
  // Transient refusals (the audit log or the store away) tell the client when to come back.
  if (typeof denial.detail.retry_after_s === 'number') headers['retry-after'] = String(denial.detail.retry_after_s)
  res.writeHead(reply?.status ?? denial.status, headers)
  res.end(body)
}

/** The request's headers minus hop-by-hop and proxy headers; what policy and upstream see. */
function forwardableHeaders(req: IncomingMessage): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {}
  // Most requests name no extra hop-by-hop headers in Connection: skip building the set then.
  const connection = req.headers.connection
  const connectionListed = connection && !/^\s*(keep-alive|close)\s*$/i.test(connection)
    ? new Set(connection.split(',').map((s) => s.trim().toLowerCase()).filter(Boolean))
    : undefined
  const h = req.headers
  for (const k in h) {
    const v = h[k]
    // HTTP/2 pseudo-headers (`:path`, `:authority`) are the request line, not headers.
    if (v === undefined || HOP_BY_HOP.has(k) || connectionListed?.has(k) || k.charCodeAt(0) === 58) continue
    out[k] = v
  }
  return out
}
