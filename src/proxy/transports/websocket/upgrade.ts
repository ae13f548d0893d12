// A WebSocket upgrade is a request (docs/proxy.md "WebSocket"): it runs the admission phases of
// every request (token, workspace, rules and CEL over its headers and path, body rules over an
// empty body, budget holds, transforms and credential injection, the audit gate), and a denial is
// answered with its status and deny body, after its row, on a connection that is then closed.
// Once allowed, the proxy opens its own WebSocket to the upstream with the transformed request;
// only when the upstream answered 101 does the agent get its 101, and the relay (relay.ts) runs
// until either side closes. An upstream that answers anything else has that status (and its
// scrubbed body, bounded) relayed, and the connection is closed: no byte after a refused upgrade
// is ever read as HTTP. The request's one row is written when the socket closes, with the
// budgets settled and `detail.websocket` (duration, messages and bytes each way, close codes).
import { STATUS_CODES, ServerResponse, type IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'
import { destinationRefusal } from '../../../net/index.js'
import { targetPath } from '../../../policy/index.js'
import { normalizeHost } from '../../ca.js'
import { DecisionContext, attributeToken, deny, denyBody, type PolicyDenial } from '../../decision.js'
import type { MaybePromise } from '../../maybe.js'
import { runPhases, type PhaseStep } from '../../phase.js'
import { forwardGate } from '../../phases/forward-gate.js'
import { checkBody, reserveBudgets } from '../../phases/request-body.js'
import { TOKEN_CLOCK_TOLERANCE_MS, requestHeaders, workspaceLimits } from '../../phases/request-headers.js'
import { terminal } from '../../phases/terminal.js'
import { transforms } from '../../phases/transforms.js'
import { ClientGone, type Entry, type ProxyCore, type RequestState, type TunnelContext } from '../../request-state.js'
import { Scrubber } from '../../scrub.js'
import { PROXY_CHALLENGE, requestToken } from '../../token.js'
import { HOP_BY_HOP } from '../../upstream.js'
import { HandshakeError, agentSwitch, openUpstream, type Refusal } from './handshake.js'
import { MessageMeter } from './meter.js'
import { CLOSE_GOING_AWAY, WebSocketRelay, type RelaySummary } from './relay.js'

const KEY = /^[A-Za-z0-9+/]{22}==$/
const EARLY_DATA = deny('no_match', { message: 'bytes were sent after the WebSocket handshake before its 101 answer', websocket: 'early_data' }, 400)

const ADMISSION: readonly PhaseStep[] = [
  { phase: 'request_headers', name: 'request-headers', run: requestHeaders },
  { phase: 'request_headers', name: 'workspace-limits', run: workspaceLimits },
  { phase: 'request_body', name: 'empty-body', run: emptyBody },
  { phase: 'request_body', name: 'budgets', run: reserveBudgets },
  { phase: 'request_body', name: 'transforms', run: transforms },
  { phase: 'request_body', name: 'forward-gate', run: forwardGate },
]

/** True for an HTTP/1.1 `Upgrade: websocket` request (other upgrades, such as h2c, are refused by the front). */
export function isWebSocketUpgrade(req: IncomingMessage): boolean {
  const up = req.headers.upgrade
  return typeof up === 'string' && up.split(',').some((p) => p.trim().toLowerCase() === 'websocket')
}

/** The open WebSockets of one front: per-workspace counts, and the shutdown close. */
export class WebSockets {
  readonly #core: ProxyCore
  readonly #open = new Set<WebSocketRelay>()
  readonly #perWorkspace = new Map<string, number>()

  constructor(core: ProxyCore) {
    this.#core = core
  }

  get open(): number {
    return this.#open.size
  }

  /** Shutdown: every socket is closed 1001; their rows are written as they close. */
  closeAll(): void {
    for (const r of this.#open) r.close(CLOSE_GOING_AWAY, 'shutdown')
  }

  /** One upgrade request from the front; resolves once its row is handed to the sink. */
  async handle(req: IncomingMessage, socket: Socket, head: Buffer, tunnel: TunnelContext | undefined): Promise<void> {
    const core = this.#core
    core.counters.requests++
    socket.on('error', () => socket.destroy())
    // The front's timers (tunnel handshake, silent connection) do not apply to a relayed socket.
    socket.setTimeout(0)
    // A client must wait for the 101 before it sends a byte (RFC 6455 4.1): bytes before it could
    // be a second request smuggled behind the upgrade. Held in `early` and refused.
    let early = head.length
    const onEarly = (b: Buffer): void => void (early += b.length)
    socket.on('data', onEarly)
    const { entry, path, preDenial } = entryOf(req, tunnel)
    const ctx = new DecisionContext({ destination: entry.host, method: (req.method ?? 'GET').toUpperCase(), path })
    const st: RequestState = { req, res: new ServerResponse(req), entry, ctx, abort: new ClientGone(), headers: forwardable(req), requestBytes: 0, responseBytes: 0 }
    socket.once('close', () => st.abort.abort())
    let denial: PolicyDenial | undefined = preDenial ?? handshakeDenial(req)
    try {
      if (denial) {
        const check = await requestToken(core.tokens, req, tunnel)
        if (check.ok) attributeToken(ctx, check)
      } else denial = (await runPhases(core, st, ADMISSION)) ?? this.#admit(st)
    } catch (err) {
      core.log.error({ err: { message: (err as Error)?.message ?? String(err) } }, 'proxy: a phase failed on a WebSocket upgrade (internal_error)')
      denial = deny('internal_error', {}, 500)
    }
    if (!denial && early > 0) denial = EARLY_DATA
    if (denial) {
      ctx.denial = denial
      await refuse(core, st, socket, denial)
      return
    }
    const ws = st.workspace!.record.id
    this.#perWorkspace.set(ws, (this.#perWorkspace.get(ws) ?? 0) + 1)
    try {
      await this.#forward(st, socket, onEarly, () => early)
    } finally {
      const n = (this.#perWorkspace.get(ws) ?? 1) - 1
      if (n > 0) this.#perWorkspace.set(ws, n)
      else this.#perWorkspace.delete(ws)
    }
  }

  /** The proxy's own WebSocket limit per workspace, once the workspace is known. */
  #admit(st: RequestState): PolicyDenial | undefined {
    const max = this.#core.limits.maxWebSocketsPerWorkspace
    if ((this.#perWorkspace.get(st.workspace!.record.id) ?? 0) >= max) return deny('limit_exceeded', { limit: 'websockets_per_workspace', max }, 429)
    return undefined
  }

  /** Opens the upstream WebSocket; on its 101 answers the agent and relays until both legs close. */
  async #forward(st: RequestState, socket: Socket, onEarly: (b: Buffer) => void, early: () => number): Promise<void> {
    const core = this.#core
    const { ctx } = st
    st.ctx.phase = 'response_headers'
    const upstream = await openUpstream(core, st).catch((err: unknown) => err as Error)
    if (upstream instanceof Error || 'status' in upstream) {
      socket.off('data', onEarly)
      await answerUpstreamFailure(core, st, socket, upstream)
      return
    }
    const meter = st.reservation ? new MessageMeter(st.workspace!.policy.kind === 'ok' ? st.workspace!.policy.policy.counters(ctx.capability!) : []) : undefined
    const check = await requestToken(core.tokens, st.req, st.entry.tunnel)
    const expiresAt = check.ok ? check.claims.exp * 1000 + TOKEN_CLOCK_TOLERANCE_MS : 0
    // From here on synchronous: the agent's bytes after its 101 must reach the relay's parser.
    socket.off('data', onEarly)
    if (early() > 0 || socket.destroyed) {
      upstream.socket.destroy()
      if (early() > 0) await refuse(core, st, socket, EARLY_DATA)
      else {
        ctx.detail.client_closed = true
        await settleAndRecord(core, st, undefined, undefined)
      }
      return
    }
    ctx.upstreamStatus = 101
    // No compression on either leg (none is offered upstream, none accepted here): the proxy reads
    // every payload to meter and scrub it, and an inflated message is a decompression bomb to bound.
    socket.write(agentSwitch(st.req, upstream.protocol))
    st.ctx.phase = 'response_body'
    const relay = new WebSocketRelay(core, st, socket, upstream.socket, { meter, scrubber: st.injected?.length ? new Scrubber(st.injected) : undefined, expiresAt, upstreamHead: upstream.head })
    this.#open.add(relay)
    const summary = await relay.finished
    this.#open.delete(relay)
    ctx.responseComplete = summary.closed_by !== 'proxy' && (summary.close_code === 1000 || summary.close_code === 1001) && !summary.error
    await settleAndRecord(core, st, meter, summary)
  }
}

/** Where the upgrade goes, as the front decides for any request (plain absolute URI or inside a tunnel). */
function entryOf(req: IncomingMessage, tunnel: TunnelContext | undefined): { entry: Entry; path: string; preDenial?: PolicyDenial } {
  const url = req.url ?? '/'
  if (tunnel) return { entry: { scheme: 'https', host: tunnel.host, port: tunnel.port, tunnel }, path: targetPath(url) || '/' }
  let parsed: URL | undefined
  try {
    parsed = /^[a-z][a-z0-9+.-]*:\/\//i.test(url) ? new URL(url) : undefined
  } catch {
    parsed = undefined
  }
  if (parsed && (parsed.protocol === 'http:' || parsed.protocol === 'ws:')) {
    return { entry: { scheme: 'http', host: normalizeHost(parsed.hostname), port: parsed.port ? Number(parsed.port) : 80 }, path: targetPath(url) || '/' }
  }
  // `wss://…` or an origin-form upgrade sent to the proxy itself never passed the TLS front.
  const host = normalizeHost(parsed ? parsed.hostname : String(req.headers.host ?? '').replace(/:\d+$/, ''))
  return { entry: { scheme: 'http', host, port: 0 }, path: parsed ? parsed.pathname || '/' : url.split('?')[0] || '/', preDenial: deny('no_scheme') }
}

/** A handshake `ws` could not complete is refused before any phase: 400. */
function handshakeDenial(req: IncomingMessage): PolicyDenial | undefined {
  const key = req.headers['sec-websocket-key']
  const ok = req.method === 'GET' && req.headers['sec-websocket-version'] === '13' && typeof key === 'string' && KEY.test(key.trim())
  return ok ? undefined : deny('no_match', { message: 'not a valid WebSocket handshake (GET, Sec-WebSocket-Version 13, a 16-byte Sec-WebSocket-Key)', websocket: 'bad_handshake' }, 400)
}

/** An upgrade carries no body; body rules see an empty one. */
function emptyBody(core: ProxyCore, st: RequestState): MaybePromise<PolicyDenial | undefined> {
  const a = st.admission!
  if (a.decision === 'allow' && !a.needsBody) return undefined
  return checkBody(core, st, Buffer.alloc(0))
}

function forwardable(req: IncomingMessage): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {}
  const connection = String(req.headers.connection ?? '')
  const listed = new Set(connection.split(',').map((s) => s.trim().toLowerCase()).filter(Boolean))
  for (const k in req.headers) {
    const v = req.headers[k]
    if (v === undefined || HOP_BY_HOP.has(k) || listed.has(k)) continue
    out[k] = v
  }
  return out
}

/** The upstream did not answer 101 (relayed, scrubbed) or could not be reached (502, or destination_private). */
async function answerUpstreamFailure(core: ProxyCore, st: RequestState, socket: Socket, failure: Error | Refusal): Promise<void> {
  const { ctx } = st
  if (failure instanceof Error) {
    const refused = destinationRefusal(failure)
    if (refused) {
      ctx.denial = deny('destination_private', { address: refused.address, port: refused.port, ...(refused.own ? { listener: 'corral' } : {}) })
      await refuse(core, st, socket, ctx.denial)
      return
    }
    ctx.detail.upstream_error = failure instanceof HandshakeError ? 'websocket_handshake' : upstreamCode(failure)
    const body = Buffer.from(JSON.stringify({ error: { code: 'upstream_unavailable', message: `The upstream could not be reached (${String(ctx.detail.upstream_error)}).` } }))
    const unrecorded = await settleAndRecord(core, st, undefined, undefined)
    if (unrecorded) await rawAnswer(socket, unrecorded.status, denyBody(ctx, unrecorded), { 'x-corral-deny-reason': unrecorded.reason })
    else await rawAnswer(socket, 502, body.toString(), {})
    return
  }
  ctx.upstreamStatus = failure.status
  ctx.responseComplete = true
  const scrubber = st.injected?.length ? new Scrubber(st.injected) : undefined
  let body = failure.body
  if (scrubber) {
    const scan = scrubber.scan()
    body = Buffer.concat([scan.push(body), scan.end() ?? Buffer.alloc(0)])
  }
  const unrecorded = await settleAndRecord(core, st, undefined, undefined)
  if (unrecorded) {
    await rawAnswer(socket, unrecorded.status, denyBody(ctx, unrecorded), { 'x-corral-deny-reason': unrecorded.reason })
    return
  }
  const type = failure.headers['content-type']
  await rawAnswer(socket, failure.status === 101 ? 502 : failure.status, body.toString('latin1'), typeof type === 'string' ? { 'content-type': scrubber ? scrubber.maskString(type) : type } : {}, 'latin1')
}

/** Settles the budgets (the connection's debits) and writes the request's one row; returns the audit refusal, if any. */
async function settleAndRecord(core: ProxyCore, st: RequestState, meter: MessageMeter | undefined, summary: RelaySummary | undefined): Promise<PolicyDenial | undefined> {
  const { ctx } = st
  if (summary) ctx.detail.websocket = summary
  try {
    if (!st.released) {
      st.released = true
      if (st.workspace) st.workspace.inFlight--
      const r = st.reservation
      if (r && core.budgets) {
        if (ctx.denial) core.budgets.release(r)
        else {
          const s = await core.budgets.settle(r, (meter ?? new MessageMeter(st.workspace!.policy.kind === 'ok' ? st.workspace!.policy.policy.counters(ctx.capability!) : [])).values())
          ctx.debits = s.debits
          ctx.budgetState = s.budgetState
          ctx.floored = s.floored
        }
      }
    }
  } catch (err) {
    core.log.error({ err: { message: (err as Error)?.message ?? String(err) } }, 'proxy: settling the WebSocket budgets failed')
  }
  const out = await terminal(core, ctx)
  return out.recorded ? undefined : deny('audit_unavailable', { retry_after_s: out.retryAfterS }, 503)
}

/** A denied upgrade: the row first, then the status and deny body, and the connection closed. */
async function refuse(core: ProxyCore, st: RequestState, socket: Socket, denial: PolicyDenial): Promise<void> {
  st.ctx.denial = denial
  const unrecorded = await settleAndRecord(core, st, undefined, undefined)
  const d = unrecorded ?? denial
  const extra: Record<string, string> = { 'x-corral-deny-reason': d.reason, 'cache-control': 'no-store' }
  if (d.status === 407) extra['proxy-authenticate'] = PROXY_CHALLENGE
  if (typeof d.detail.retry_after_s === 'number') extra['retry-after'] = String(d.detail.retry_after_s)
  await rawAnswer(socket, d.status, denyBody(st.ctx, d), extra)
}

/** Writes one HTTP/1.1 answer on the raw socket and closes it. */
function rawAnswer(socket: Socket, status: number, body: string, headers: Record<string, string>, encoding: BufferEncoding = 'utf8'): Promise<void> {
  if (socket.destroyed || !socket.writable) {
    socket.destroy()
    return Promise.resolve()
  }
  const all = { 'content-type': 'application/json', ...headers, 'content-length': String(Buffer.byteLength(body, encoding)), connection: 'close' }
  const head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Unknown'}\r\n${Object.entries(all).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`
  return new Promise((resolve) => {
    socket.end(Buffer.concat([Buffer.from(head, 'latin1'), Buffer.from(body, encoding)]), () => resolve())
    // A peer that never reads must not keep the socket.
    socket.setTimeout(5_000, () => socket.destroy())
    socket.once('close', () => resolve())
  })
}

function upstreamCode(err: Error): string {
  const e = err as { code?: string; cause?: { code?: string } }
  const code = e.cause?.code ?? e.code ?? 'error'
  if (/CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS/.test(code)) return 'tls_verify_failed'
  if (code === 'ECONNREFUSED') return 'connection_refused'
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'dns_failed'
  if (code === 'ECONNRESET') return 'connection_reset'
  if (/timed out|timeout/i.test(err.message)) return 'timeout'
  return 'error'
}
