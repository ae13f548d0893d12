// The relay of one allowed WebSocket: the `ws` library speaks the protocol on both legs (the
// agent's, where the proxy is the server, and the upstream's, where it is the client), so
// masking, control frames, fragmentation, UTF-8 and size limits are enforced by a maintained
// implementation on each side, and each message is seen whole (fragments reassembled, at most
// wsMaxMessageBytes) before it is metered, scrubbed and sent on. Messages keep their order per
// direction even while a budget refill waits on the ledger (the source leg is paused meanwhile).
//
// Close codes the proxy sends (docs/proxy.md "WebSocket"): 4008 a budget ran out, 1008 the
// workspace was stopped or the token expired, 1001 idle timeout or shutdown, 1009 a message over the size limit,
// 1002/1007 a protocol or UTF-8 violation, 1014 the upstream vanished without a close frame;
// otherwise a close is passed on with the code the other side sent.
import type { WebSocket, RawData } from 'ws'
import type { PolicyDenial } from '../../decision.js'
import type { ProxyCore, RequestState } from '../../request-state.js'
import type { Scrubber } from '../../scrub.js'
import type { MessageAmount, MessageMeter } from './meter.js'

type Leg = 'agent' | 'upstream'
type Direction = 'to_upstream' | 'to_agent'

export const CLOSE_BUDGET = 4008
export const CLOSE_POLICY = 1008
export const CLOSE_GOING_AWAY = 1001
export const CLOSE_UPSTREAM_GONE = 1014

/** Bytes queued toward one leg beyond which the other leg is paused until they are written. */
const HIGH_WATER = 1024 * 1024
/** After one leg closed, how long the other may take to finish its close handshake. */
const CLOSE_GRACE_MS = 5_000

interface Flow {
  messages: number
  bytes: number
}

interface Pending {
  data: Buffer
  binary: boolean
}

/** What the closing row says about the connection (`detail.websocket`). */
export interface RelaySummary {
  closed_by: Leg | 'proxy'
  close_code: number
  close_reason?: string
  upstream_close_code?: number
  duration_ms: number
  to_upstream: Flow
  to_agent: Flow
  pings: number
  error?: string
  counter?: string
}

export class WebSocketRelay {
  readonly #core: ProxyCore
  readonly #st: RequestState
  readonly #legs: Record<Leg, WebSocket>
  readonly #meter: MessageMeter | undefined
  readonly #scrubber: Scrubber | undefined
  readonly #flows: Record<Direction, Flow> = { to_upstream: { messages: 0, bytes: 0 }, to_agent: { messages: 0, bytes: 0 } }
  readonly #queues: Record<Direction, Pending[]> = { to_upstream: [], to_agent: [] }
  readonly #busy: Record<Direction, boolean> = { to_upstream: false, to_agent: false }
  readonly #queued: Record<Leg, number> = { agent: 0, upstream: 0 }
  readonly #startedAt = performance.now()
  readonly #idle: NodeJS.Timeout
  readonly #closed: Record<Leg, boolean> = { agent: false, upstream: false }
  #pings = 0
  #closedBy: Leg | 'proxy' | undefined
  #agentCode: number | undefined
  #upstreamCode: number | undefined
  #reason: string | undefined
  #error: string | undefined
  #counter: string | undefined
  /** The close code `ws` sent on a leg after a violation there (it reads no close frame back, so its 'close' says 1006). */
  readonly #violation: Partial<Record<Leg, number>> = {}
  #grace: NodeJS.Timeout | undefined
  #done!: (s: RelaySummary) => void
  /** Resolves once both legs are closed, with what the row records. */
  readonly finished: Promise<RelaySummary>

  /** When the capability token stops being honoured (ms since the epoch); the next message after it closes the socket. */
  readonly #expiresAt: number

  constructor(core: ProxyCore, st: RequestState, agent: WebSocket, upstream: WebSocket, meter: MessageMeter | undefined, scrubber: Scrubber | undefined, expiresAt = Infinity) {
    this.#core = core
    this.#expiresAt = expiresAt
    this.#st = st
    this.#legs = { agent, upstream }
    this.#meter = meter?.meters ? meter : undefined
    this.#scrubber = scrubber
    this.finished = new Promise((r) => (this.#done = r))
    this.#idle = setTimeout(() => this.close(CLOSE_GOING_AWAY, 'idle_timeout'), core.limits.wsIdleTimeoutMs)
    this.#wire('agent', 'upstream', 'to_upstream')
    this.#wire('upstream', 'agent', 'to_agent')
  }

  /** Closes both legs with `code` (the proxy's decision: budget, shutdown, idle, workspace stopped). */
  close(code: number, reason: string, counter?: string): void {
    if (this.#closedBy) return
    this.#closedBy = 'proxy'
    this.#reason = reason
    if (counter) this.#counter = counter
    this.#agentCode = code
    this.#upstreamCode = code
    for (const leg of ['agent', 'upstream'] as const) this.#closeLeg(leg, code, reason)
  }

  #wire(from: Leg, to: Leg, dir: Direction): void {
    const src = this.#legs[from]
    src.on('message', (data: RawData, isBinary: boolean) => this.#onMessage(dir, toBuffer(data), isBinary))
    src.on('ping', (data: Buffer) => {
      this.#pings++
      this.#idle.refresh()
      // Answered on this leg by `ws` (autoPong); passed on so the far end sees the peer is alive.
      if (this.#legs[to].readyState === 1) this.#legs[to].ping(data)
    })
    src.on('pong', () => this.#idle.refresh())
    src.on('error', (err: Error & { code?: string }) => {
      this.#error ??= `${from}:${err.code ?? 'error'}`
      this.#violation[from] ??= violationCode(err.code)
      // `ws` has sent its close frame (1002, 1007, 1009); a peer that never answers it is cut.
      setTimeout(() => src.terminate(), 1_000).unref()
    })
    src.on('close', (code: number) => this.#onClose(from, to, code, src))
  }

  #onMessage(dir: Direction, data: Buffer, binary: boolean): void {
    this.#idle.refresh()
    if (this.#closedBy) return
    if (this.#busy[dir]) {
      this.#queues[dir].push({ data, binary })
      return
    }
    this.#process(dir, data, binary)
  }

  /** Meters (and maybe waits for the ledger), then sends; drains the queue of its direction. */
  #process(dir: Direction, data: Buffer, binary: boolean): void {
    if (!this.#st.workspace!.active) {
      this.close(CLOSE_POLICY, 'workspace_gone')
      return
    }
    // A socket outlives its upgrade, not its token (as a keep-alive tunnel does not).
    if (Date.now() > this.#expiresAt) {
      this.close(CLOSE_POLICY, 'token_expired')
      return
    }
    const amounts = this.#meter ? this.#meter.measure({ direction: dir, text: !binary, data }) : []
    const held = amounts.length ? this.#grow(amounts) : undefined
    if (held instanceof Promise) {
      this.#busy[dir] = true
      const src = this.#legs[dir === 'to_upstream' ? 'agent' : 'upstream']
      src.pause()
      held.then((d) => this.#after(dir, data, binary, amounts, d), (err: unknown) => {
        this.#core.log.error({ err: { message: (err as Error)?.message ?? String(err) } }, 'proxy: a WebSocket budget hold failed; the socket was closed')
        this.close(CLOSE_BUDGET, 'budget_unavailable')
      }).finally(() => {
        this.#busy[dir] = false
        if (!this.#closedBy) src.resume()
        this.#drain(dir)
      })
      return
    }
    this.#after(dir, data, binary, amounts, held)
  }

  #drain(dir: Direction): void {
    while (!this.#busy[dir] && !this.#closedBy) {
      const next = this.#queues[dir].shift()
      if (!next) return
      this.#process(dir, next.data, next.binary)
    }
    this.#queues[dir].length = 0
  }

  /** Takes the message's amounts from the budgets, counter by counter; the first refusal wins. */
  #grow(amounts: readonly MessageAmount[]): ReturnType<NonNullable<ProxyCore['budgets']>['grow']> {
    const budgets = this.#core.budgets
    const r = this.#st.reservation
    if (!budgets || !r) return undefined
    let i = 0
    const step = (): ReturnType<typeof budgets.grow> => {
      for (; i < amounts.length; i++) {
        const out = budgets.grow(r, amounts[i]!.counter.name, amounts[i]!.amount)
        if (out instanceof Promise) {
          i++
          return out.then((d) => d ?? step())
        }
        if (out) return out
      }
      return undefined
    }
    return step()
  }

  #after(dir: Direction, data: Buffer, binary: boolean, amounts: readonly MessageAmount[], refused: PolicyDenial | undefined): void {
    if (this.#closedBy) return
    if (refused) {
      // The message that would pass the ceiling is not relayed; the row names the counter.
      this.close(CLOSE_BUDGET, 'budget_exhausted', String(refused.detail.counter ?? ''))
      return
    }
    this.#meter?.commit(amounts)
    const out = dir === 'to_agent' && this.#scrubber ? scrub(this.#scrubber, data) : data
    const to: Leg = dir === 'to_upstream' ? 'upstream' : 'agent'
    const dest = this.#legs[to]
    if (dest.readyState !== 1) return
    const flow = this.#flows[dir]
    flow.messages++
    flow.bytes += data.length
    this.#queued[to] += out.length
    const src = this.#legs[to === 'upstream' ? 'agent' : 'upstream']
    if (this.#queued[to] > HIGH_WATER) src.pause()
    dest.send(out, { binary }, () => {
      this.#queued[to] -= out.length
      if (this.#queued[to] <= HIGH_WATER && !this.#busy[dir] && !this.#closedBy) src.resume()
    })
  }

  #onClose(from: Leg, to: Leg, received: number, src: WebSocket): void {
    this.#closed[from] = true
    const code = this.#violation[from] ?? received
    if (from === 'agent') this.#agentCode ??= code
    else this.#upstreamCode ??= code
    if (!this.#closedBy) {
      this.#closedBy = from
      // 1005 (no code) and 1006 (no close frame) are never sent on the wire.
      const passOn = from === 'upstream' && code === 1006 ? CLOSE_UPSTREAM_GONE : from === 'agent' && code === 1006 ? CLOSE_GOING_AWAY : code === 1005 ? 1000 : code
      if (from === 'upstream') this.#agentCode = passOn
      else this.#upstreamCode = passOn
      this.#closeLeg(to, passOn, '')
    }
    src.removeAllListeners('message')
    if (this.#closed.agent && this.#closed.upstream) this.#finish()
  }

  #closeLeg(leg: Leg, code: number, reason: string): void {
    const ws = this.#legs[leg]
    if (ws.readyState === 3) return
    // A leg paused for back-pressure or a ledger wait must read the peer's close frame.
    ws.resume()
    try {
      if (ws.readyState === 1) ws.close(code, reason)
      else ws.terminate()
    } catch {
      ws.terminate()
    }
    this.#grace ??= setTimeout(() => {
      for (const l of ['agent', 'upstream'] as const) this.#legs[l].terminate()
    }, CLOSE_GRACE_MS)
    this.#grace.unref()
  }

  #finish(): void {
    clearTimeout(this.#idle)
    clearTimeout(this.#grace)
    this.#done({
      closed_by: this.#closedBy ?? 'proxy',
      close_code: this.#agentCode ?? 1006,
      ...(this.#reason ? { close_reason: this.#reason } : {}),
      ...(this.#upstreamCode !== undefined ? { upstream_close_code: this.#upstreamCode } : {}),
      duration_ms: Math.max(0, Math.round(performance.now() - this.#startedAt)),
      to_upstream: { ...this.#flows.to_upstream },
      to_agent: { ...this.#flows.to_agent },
      pings: this.#pings,
      ...(this.#error ? { error: this.#error } : {}),
      ...(this.#counter ? { counter: this.#counter } : {}),
    })
  }
}

/** A message from the upstream with every injected value masked (scrub.ts), seen whole. */
function scrub(scrubber: Scrubber, data: Buffer): Buffer {
  const scan = scrubber.scan()
  const head = scan.push(data)
  const tail = scan.end()
  return tail && tail.length ? Buffer.concat([head, tail]) : head
}

/** The close code `ws` sends for each of its protocol errors (RFC 6455 7.4.1). */
function violationCode(code: string | undefined): number {
  if (code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') return 1009
  if (code === 'WS_ERR_INVALID_UTF8') return 1007
  return 1002
}

function toBuffer(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data
  if (Array.isArray(data)) return Buffer.concat(data)
  return Buffer.from(data)
}

