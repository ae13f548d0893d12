// The phase runner: enforces the order of phases (STYLE.md §4), stops at the first denial, turns
// thrown faults into `internal_error`, and always ends in the terminal phase, which writes the
// request's one policy_decision row.
import type { IncomingMessage, ServerResponse } from 'node:http'
import { isStoreUnavailable } from '../store/index.js'
import { CONTROL_HOST } from '../contract/index.js'
import { serveAgentCallback } from './agent-callbacks.js'
import { DecisionContext, PolicyDenial, attributeToken, deny, denyBody, type PhaseOutcome } from './decision.js'
import { requestBody, reserveBudgets } from './phases/request-body.js'
import { requestHeaders } from './phases/request-headers.js'
import { responseBody } from './phases/response-body.js'
import { responseHeaders } from './phases/response-headers.js'
import { terminal } from './phases/terminal.js'
import { transforms } from './phases/transforms.js'
import { upstream } from './phases/upstream.js'
import type { Settlement } from './budgets.js'
import { ClientGone, type Entry, type ProxyCore, type RequestState } from './request-state.js'
import { requestToken } from './token.js'
import { HOP_BY_HOP } from './upstream.js'

/**
 * Runs one request through the phases. `preDenial` is the front's verdict for a request that did
 * not come through it properly (no_scheme) or uses a refused method; it is still attributed from
 * its token when that verifies. A deny's row is handed to the sink before the deny is sent; an
 * allow's row is written at the end of its relayed response. Never rejects for a fault of the
 * phases (internal_error); the front's error boundary handles the rest.
 */
export async function runRequest(core: ProxyCore, req: IncomingMessage, res: ServerResponse, entry: Entry, path: string, preDenial?: PolicyDenial): Promise<void> {
  // The second door: agent callbacks to the control plane, answered after the token check by the
  // handler the proxy was built with (agent-callbacks.ts); never the phases.
  if (!preDenial && entry.host === CONTROL_HOST && (await serveAgentCallback(core, req, res, entry, path))) return
  const ctx = new DecisionContext({ destination: entry.host, method: (req.method ?? 'GET').toUpperCase(), path })
  const st: RequestState = { req, res, entry, ctx, abort: new ClientGone(), headers: forwardableHeaders(req), requestBytes: 0, responseBytes: 0 }
  res.once('close', () => {
    if (!res.writableFinished) st.abort.abort()
  })
  let denial: PolicyDenial | undefined
  try {
    denial = preDenial ? await attributeOnly(core, st, preDenial) : await admitAndPrepare(core, st)
    if (!denial) core.faultHook?.('forward')
  } catch (err) {
    // A throw that is not a policy outcome is a fault of the proxy: internal_error, never silence.
    denial = err instanceof PolicyDenial ? err : internalError(core, err)
  }
  if (denial) {
    // The row first, then the answer: a client never holds a deny that the log does not.
    ctx.denial = denial
    sendDeny(st, (await record(core, st)) ?? denial)
    return
  }
  // The allow's row is recorded when the upstream body has ended, before the client's response
  // is ended (response-body.ts); a refused row cuts the response instead of completing it.
  st.beforeEnd = async () => (await record(core, st)) === undefined
  try {
    await forwardAndRelay(core, st)
  } catch (err) {
    // A PolicyDenial here is the address check refusing the upstream connection (destination_private, address-guard.ts).
    if (err instanceof PolicyDenial) ctx.denial = err
    else if (st.bodyLimitHit) ctx.denial = deny('limit_exceeded', { limit: 'body_bytes', max: core.limits.maxBodyBytes }, 413)
    else noteUpstreamFailure(st, err)
    const unrecorded = ctx.emitted ? undefined : await record(core, st)
    if (st.res.headersSent || st.abort.aborted) st.res.destroy()
    else if (unrecorded || ctx.denial) sendDeny(st, unrecorded ?? ctx.denial!)
    else sendUpstreamUnavailable(st)
  } finally {
    if (!ctx.emitted) await record(core, st)
  }
}

/** The phases after admission, in order; only the runner moves `ctx.phase` (the row's phase). */
async function forwardAndRelay(core: ProxyCore, st: RequestState): Promise<void> {
  const response = await upstream(core, st)
  st.ctx.phase = 'response_headers'
  const body = responseHeaders(st, response, st.meter)
  st.ctx.phase = 'response_body'
  await responseBody(st, body, st.meter)
}

/**
 * Releases the request's holds and records its row. Returns undefined when the row is recorded,
 * else the `audit_unavailable` denial to answer with instead (nothing more may leave).
 */
async function record(core: ProxyCore, st: RequestState): Promise<PolicyDenial | undefined> {
  try {
    const releasing = release(core, st)
    if (releasing) await releasing
  } catch (err) {
    // The row is still written (exactly one per request); the budgets module reports its own state.
    core.log.error({ err: { message: (err as Error)?.message ?? String(err) } }, 'proxy: settling the request budgets failed')
  }
  const out = await terminal(core, st.ctx)
  return out.recorded ? undefined : deny('audit_unavailable', { retry_after_s: out.retryAfterS }, 503)
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
  if (!core.faultHook) core.log.error({ err: { message: e?.message ?? String(err), stack: e?.stack } }, 'proxy: a phase failed (internal_error)')
  return deny('internal_error', {}, 500)
}

const STORE_RETRY_S = 2
const lastStoreWarn = new WeakMap<ProxyCore, number>()

/**
 * Once per request: the workspace's in-flight slot and the budget holds or debits (durable before
 * the row). A promise only when a debit must reach the ledger first; may throw.
 */
function release(core: ProxyCore, st: RequestState): Promise<void> | undefined {
  if (st.released) return undefined
  st.released = true
  if (st.workspace) st.workspace.inFlight--
  return settleBudgets(core, st)
}

async function admitAndPrepare(core: ProxyCore, st: RequestState): Promise<PhaseOutcome> {
  const { ctx } = st
  ctx.phase = 'request_headers'
  core.faultHook?.('request_headers')
  let d = await requestHeaders(core, st)
  if (d) return d
  d = perWorkspaceLimits(core, st)
  if (d) return d
  ctx.phase = 'request_body'
  core.faultHook?.('request_body')
  // The phases below answer without a promise when they need not wait (no await then).
  let p = requestBody(core, st)
  d = p instanceof Promise ? await p : p
  if (d) return d
  p = reserveBudgets(core, st)
  d = p instanceof Promise ? await p : p
  if (d) return d
  core.faultHook?.('transforms')
  p = transforms(core, st)
  d = p instanceof Promise ? await p : p
  if (d) return d
  // Last look before bytes leave: a workspace stopped while we worked must not send anything.
  if (!st.workspace!.active) return deny('workspace_gone')
  // Fail closed: while the audit log refuses rows, nothing is forwarded (audit-gate.ts).
  const retryAfterS = core.auditGate.closedFor()
  if (retryAfterS !== undefined) return deny('audit_unavailable', { retry_after_s: retryAfterS }, 503)
  return undefined
}

/** Commits debits of an allowed request (durable before its row: budgets.ts), or returns the holds of a denied one. */
function settleBudgets(core: ProxyCore, st: RequestState): Promise<void> | undefined {
  const r = st.reservation
  if (!r || !core.budgets) return undefined
  if (st.ctx.denial) {
    core.budgets.release(r)
    return undefined
  }
  const settled = core.budgets.settleNow(r, st.meter!.values(st.requestBytes))
  if (settled instanceof Promise) return settled.then((s) => noteSettlement(st, s))
  noteSettlement(st, settled)
  return undefined
}

function noteSettlement(st: RequestState, s: Settlement): void {
  st.ctx.debits = s.debits
  st.ctx.budgetState = s.budgetState
  st.ctx.floored = s.floored
}

/** The proxy's own limits for an attributed request (docs/reliability.md, "Limits"). */
function perWorkspaceLimits(core: ProxyCore, st: RequestState): PhaseOutcome {
  const L = core.limits
  if (st.workspace && st.workspace.inFlight > L.maxInFlightPerWorkspace) {
    return deny('limit_exceeded', { limit: 'inflight_per_workspace', max: L.maxInFlightPerWorkspace }, 429)
  }
  const declared = Number(st.req.headers['content-length'])
  if (Number.isFinite(declared) && declared > L.maxBodyBytes) return deny('limit_exceeded', { limit: 'body_bytes', max: L.maxBodyBytes }, 413)
  return undefined
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
  const body = denyBody(st.ctx, denial)
  const headers: Record<string, string | number> = {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    'x-corral-deny-reason': denial.reason,
    'cache-control': 'no-store',
  }
  // An unread request body cannot be skipped on a keep-alive connection without reading it all.
  if (!req.complete) headers.connection = 'close'
  // Transient refusals (the audit log or the store away) tell the client when to come back.
  if (typeof denial.detail.retry_after_s === 'number') headers['retry-after'] = String(denial.detail.retry_after_s)
  res.writeHead(denial.status, headers)
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
    if (v === undefined || HOP_BY_HOP.has(k) || connectionListed?.has(k)) continue
    out[k] = v
  }
  return out
}
