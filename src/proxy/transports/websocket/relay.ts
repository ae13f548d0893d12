// The relay of one allowed WebSocket, frame by frame: what a leg's parser (frames.ts) hands on is
// metered, scrubbed and written to the other leg as it arrives, re-framed (the proxy is a server to
// the agent, its frames unmasked, and a client to the upstream, its frames masked; RFC 6455 5.4
// lets an intermediary re-fragment a message that uses no extension). No message is gathered:
// what is held is the scrubber's carry (shorter than the longest injected value, so a secret split
// across frames is still masked whole), a `websocket.message` counter's bounded copy of a text
// message, and at most HIGH_WATER queued toward a slow reader. Each direction is one ordered lane:
// data and control frames go out in the order they came, also while a budget refill waits on the
// ledger (the source leg is paused meanwhile).
//
// Close codes the proxy sends (docs/proxy.md "WebSocket"): 4008 a budget ran out, 1008 the
// workspace was stopped or the token expired, 1001 idle timeout or shutdown, 1009 a message over
// the size limit or too large to meter, 1002/1007 a protocol or UTF-8 violation, 1014 the upstream
// vanished without a close frame, 1011 a fault of the relay's own; otherwise a close is passed on
// as the other side sent it, code and reason (scrubbed toward the agent).
import type { Duplex } from 'node:stream'
import { andThen, type MaybePromise } from '../../maybe.js'
import type { ProxyCore, RequestState } from '../../request-state.js'
import type { Scrubber } from '../../scrub.js'
import { FrameParser, OP_BINARY, OP_CLOSE, OP_CONTINUATION, OP_PING, OP_PONG, OP_TEXT, closePayload, encodeFrame, type Role } from './frames.js'
import { grow, type MessageAmount, type MessageMeter } from './meter.js'

import { lane, type Direction, type Flow, type Lane, type Leg, type Step } from './lane.js'

export const CLOSE_BUDGET = 4008
export const CLOSE_POLICY = 1008
export const CLOSE_GOING_AWAY = 1001
export const CLOSE_TOO_BIG = 1009
export const CLOSE_INTERNAL = 1011
export const CLOSE_UPSTREAM_GONE = 1014

/** Bytes queued toward one leg beyond which the other leg is paused until they are written. */
const HIGH_WATER = 1024 * 1024
/** After one leg closed, how long the other may take to finish its close handshake. */
const CLOSE_GRACE_MS = 5_000
/** After a violation, how long the peer at fault may take to answer the close. */
const VIOLATION_GRACE_MS = 1_000

interface LegState {
  readonly socket: Duplex
  /** The proxy's role on this leg: the frames it writes are masked when it is the client. */
  readonly role: Role
  readonly parser: FrameParser
  sentClose: boolean
  gotClose: boolean
  closed: boolean
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

export interface RelayOptions {
  meter: MessageMeter | undefined
  scrubber: Scrubber | undefined
  /** When the capability token stops being honoured (ms since the epoch); the next message after it closes the socket. */
  expiresAt: number
  /** Bytes the upstream sent right behind its 101. */
  upstreamHead: Buffer
}

export class WebSocketRelay {
  readonly #core: ProxyCore
  readonly #st: RequestState
  readonly #legs: Record<Leg, LegState>
  readonly #lanes: Record<Direction, Lane>
  readonly #meter: MessageMeter | undefined
  readonly #scrubber: Scrubber | undefined
  readonly #expiresAt: number
  readonly #startedAt = performance.now()
  readonly #idle: NodeJS.Timeout
  #pings = 0
  #closedBy: Leg | 'proxy' | undefined
  #agentCode: number | undefined
  #upstreamCode: number | undefined
  #reason: string | undefined
  #error: string | undefined
  #counter: string | undefined
  #grace: NodeJS.Timeout | undefined
  #done!: (s: RelaySummary) => void
  /** Resolves once both legs are closed, with what the row records. */
  readonly finished: Promise<RelaySummary>

  constructor(core: ProxyCore, st: RequestState, agent: Duplex, upstream: Duplex, opts: RelayOptions) {
    this.#core = core
    this.#st = st
    this.#meter = opts.meter?.meters ? opts.meter : undefined
    this.#scrubber = opts.scrubber
    this.#expiresAt = opts.expiresAt
    this.finished = new Promise((r) => (this.#done = r))
    this.#idle = setTimeout(() => this.close(CLOSE_GOING_AWAY, 'idle_timeout'), core.limits.wsIdleTimeoutMs)
    this.#lanes = { to_upstream: lane('to_upstream', 'agent', 'upstream'), to_agent: lane('to_agent', 'upstream', 'agent') }
    this.#legs = { agent: this.#leg('agent', agent, 'server', this.#lanes.to_upstream), upstream: this.#leg('upstream', upstream, 'client', this.#lanes.to_agent) }
    this.#wire('agent', Buffer.alloc(0))
    this.#wire('upstream', opts.upstreamHead)
  }

  /** Closes both legs with `code` (the proxy's decision: budget, shutdown, idle, workspace stopped). */
  close(code: number, reason: string, counter?: string): void {
    if (this.#closedBy) return
    this.#closedBy = 'proxy'
    this.#reason = reason
    if (counter) this.#counter = counter
    this.#agentCode = code
    this.#upstreamCode = code
    for (const leg of ['agent', 'upstream'] as const) this.#sendClose(leg, code, reason)
  }

  #leg(name: Leg, socket: Duplex, role: Role, from: Lane): LegState {
    const parser = new FrameParser(role, this.#core.limits.wsMaxMessageBytes, {
      start: (text) => this.#enqueue(from, { kind: 'start', text }),
      data: (chunk, end) => this.#enqueue(from, { kind: 'data', chunk, end }),
      control: (opcode, payload) => this.#control(name, from, opcode, payload),
      error: (code, close) => this.#violation(name, code, close),
    })
    return { socket, role, parser, sentClose: false, gotClose: false, closed: false }
  }

  #wire(name: Leg, head: Buffer): void {
    const l = this.#legs[name]
    const s = l.socket
    s.on('data', (b: Buffer) => {
      this.#idle.refresh()
      try {
        l.parser.push(b)
      } catch (err) {
        this.#fault(err)
      }
    })
    // A peer's FIN ends the leg (the agent's socket comes from an HTTP server, which allows half-open).
    s.on('end', () => s.end())
    s.on('error', () => s.destroy())
    s.on('close', () => this.#onSocketClose(name))
    s.on('drain', () => this.#onDrain(name))
    if (head.length) l.parser.push(head)
    s.resume()
  }

  #control(from: Leg, lane: Lane, opcode: number, payload: Buffer): void {
    if (opcode === OP_PING) {
      this.#pings++
      // Answered on this leg at once (as `ws` does), and passed on in order so the far end sees its peer alive.
      this.#write(from, OP_PONG, payload)
      this.#enqueue(lane, { kind: 'ping', payload })
    } else if (opcode === OP_CLOSE) {
      // After the proxy decided to close, a peer's close answers it: read even while the lane waits.
      if (this.#closedBy) this.#onCloseFrame(from, payload)
      else this.#enqueue(lane, { kind: 'close', payload })
    }
    // A pong answers a ping the proxy passed on (the peer that sent it had its pong already).
  }

  #enqueue(lane: Lane, step: Step): void {
    if (this.#closedBy) return
    lane.steps.push(step)
    if (!lane.busy) this.#drain(lane)
  }

  /** Runs the lane's steps in order; one that must wait on the ledger pauses the source leg until it is done. */
  #drain(lane: Lane): void {
    while (!lane.busy && !this.#closedBy) {
      const step = lane.steps.shift()
      if (!step) return
      let out: MaybePromise<void>
      try {
        out = this.#step(lane, step)
      } catch (err) {
        return this.#fault(err)
      }
      if (out instanceof Promise) {
        lane.busy = true
        this.#legs[lane.from].socket.pause()
        out.catch((err: unknown) => {
          this.#core.log.error({ err: { message: (err as Error)?.message ?? String(err) } }, 'proxy: a WebSocket budget hold failed; the socket was closed')
          this.close(CLOSE_BUDGET, 'budget_unavailable')
        }).finally(() => {
          lane.busy = false
          if (this.#closedBy) return
          if (!lane.blocked) this.#legs[lane.from].socket.resume()
          this.#drain(lane)
        })
        return
      }
    }
    lane.steps.length = 0
  }

  #step(lane: Lane, step: Step): MaybePromise<void> {
    switch (step.kind) {
      case 'start':
        return this.#start(lane, step.text)
      case 'data':
        return this.#data(lane, step.chunk, step.end)
      case 'ping':
        this.#write(lane.to, OP_PING, lane.dir === 'to_agent' && this.#scrubber ? this.#scrubber.whole(step.payload) : step.payload)
        return
      case 'close':
        this.#onCloseFrame(lane.from, step.payload)
    }
  }

  /** A message begins: the socket's standing is checked, per-message counters take their 1. */
  #start(lane: Lane, text: boolean): MaybePromise<void> {
    if (!this.#st.workspace!.active) return this.close(CLOSE_POLICY, 'workspace_gone')
    // A socket outlives its upgrade, not its token (as a keep-alive tunnel does not).
    if (Date.now() > this.#expiresAt) return this.close(CLOSE_POLICY, 'token_expired')
    lane.text = text
    lane.sent = false
    lane.scan = lane.dir === 'to_agent' && this.#scrubber ? this.#scrubber.scan() : undefined
    lane.copy = text && this.#meter?.reader(lane.dir) ? [] : undefined
    lane.copied = 0
    return this.#meter ? this.#take(this.#meter.started(lane.dir), () => undefined) : undefined
  }

  /** Payload of the current message: bytes counters take it, the last chunk waits for the message's CEL counters. */
  #data(lane: Lane, chunk: Buffer, end: boolean): MaybePromise<void> {
    const meter = this.#meter
    if (!meter) return this.#send(lane, chunk, end)
    if (lane.copy) {
      lane.copied += chunk.length
      // A message a counter cannot read whole is not delivered whole (fail closed, docs/proxy.md).
      if (lane.copied > this.#core.limits.wsMeterMessageBytes) return this.close(CLOSE_TOO_BIG, 'metered_message_too_large', meter.reader(lane.dir))
      lane.copy.push(Buffer.from(chunk))
    }
    let amounts = meter.bytes(lane.dir, chunk.length)
    if (end) {
      amounts = amounts.concat(meter.ended(lane.dir, lane.text, lane.copy && (lane.copy.length === 1 ? lane.copy[0] : Buffer.concat(lane.copy))))
      lane.copy = undefined
    }
    return this.#take(amounts, () => this.#send(lane, chunk, end))
  }

  /** Takes the amounts from the budgets, then runs `then`; a refusal closes the socket 4008 instead. */
  #take(amounts: readonly MessageAmount[], then: () => void): MaybePromise<void> {
    if (!amounts.length) return then()
    return andThen(this.#core.budgets && this.#st.reservation ? grow(this.#core.budgets, this.#st.reservation, amounts) : undefined, (refused) => {
      if (this.#closedBy) return
      // What would pass the ceiling is not relayed; the row names the counter.
      if (refused) return this.close(CLOSE_BUDGET, 'budget_exhausted', String(refused.detail.counter ?? ''))
      this.#meter!.commit(amounts)
      then()
    })
  }

  /** Scrubs (toward the agent) and writes one chunk as a frame of the current message. */
  #send(lane: Lane, chunk: Buffer, end: boolean): void {
    const dest = this.#legs[lane.to]
    if (dest.sentClose || dest.closed) return
    lane.flow.bytes += chunk.length
    if (end) lane.flow.messages++
    let out = lane.scan ? lane.scan.push(chunk) : chunk
    if (end && lane.scan) {
      const tail = lane.scan.end()
      if (tail?.length) out = Buffer.concat([out, tail])
    }
    // Bytes the scrubber holds back (the start of a possible secret) go out with the next chunk.
    if (out.length === 0 && !end) return
    const opcode = lane.sent ? OP_CONTINUATION : lane.text ? OP_TEXT : OP_BINARY
    lane.sent = true
    if (this.#write(lane.to, opcode, out, end) > HIGH_WATER && !lane.blocked) {
      lane.blocked = true
      this.#legs[lane.from].socket.pause()
    }
  }

  /** Writes one frame to a leg still open for it; returns the bytes queued there. */
  #write(to: Leg, opcode: number, payload: Buffer, fin = true): number {
    const l = this.#legs[to]
    if (l.sentClose || l.closed || !l.socket.writable) return 0
    l.socket.write(encodeFrame(opcode, fin, payload, l.role))
    return l.socket.writableLength
  }

  #onDrain(to: Leg): void {
    const lane = this.#lanes[to === 'upstream' ? 'to_upstream' : 'to_agent']
    if (!lane.blocked) return
    lane.blocked = false
    if (!lane.busy && !this.#closedBy) this.#legs[lane.from].socket.resume()
  }

  /**
   * A close frame from a leg: answered there with its code, and (if first) passed on to the other
   * leg as sent — code and reason, the reason scrubbed toward the agent like any upstream byte; a
   * close without a code stays one (1005 to the reader).
   */
  #onCloseFrame(from: Leg, payload: Buffer): void {
    const l = this.#legs[from]
    if (l.gotClose) return
    l.gotClose = true
    const code = payload.length >= 2 ? payload.readUInt16BE(0) : undefined
    if (from === 'agent') this.#agentCode ??= code ?? 1005
    else this.#upstreamCode ??= code ?? 1005
    if (l.sentClose) l.socket.end()
    else this.#sendClose(from, code, '')
    if (this.#closedBy) return
    const reason = payload.subarray(2)
    this.#passOn(from, code, from === 'upstream' && this.#scrubber && reason.length ? this.#scrubber.whole(reason) : reason)
  }

  /** The first leg to close, by frame, violation or vanishing: the other leg is closed with `code`. */
  #passOn(from: Leg, code: number | undefined, reason: string | Buffer = ''): void {
    this.#closedBy = from
    if (from === 'upstream') this.#agentCode = code ?? 1005
    else this.#upstreamCode = code ?? 1005
    this.#sendClose(from === 'agent' ? 'upstream' : 'agent', code, reason)
  }

  /** An error boundary: a fault of the relay's own closes this socket (1011), never the process. */
  #fault(err: unknown): void {
    this.#core.log.error({ err: { message: (err as Error)?.message ?? String(err) } }, 'proxy: the WebSocket relay failed; the socket was closed')
    this.#error ??= 'proxy:internal_error'
    this.close(CLOSE_INTERNAL, 'internal_error')
  }

  #violation(leg: Leg, code: string, close: number): void {
    this.#error ??= `${leg}:${code}`
    if (leg === 'agent') this.#agentCode ??= close
    else this.#upstreamCode ??= close
    this.#sendClose(leg, close, '')
    const s = this.#legs[leg].socket
    // The peer at fault has the close frame; one that never answers it is cut.
    setTimeout(() => s.destroy(), VIOLATION_GRACE_MS).unref()
    if (!this.#closedBy) this.#passOn(leg, close)
  }

  #sendClose(leg: Leg, code: number | undefined, reason: string | Buffer): void {
    const l = this.#legs[leg]
    if (l.closed) return
    if (!l.sentClose) {
      this.#write(leg, OP_CLOSE, closePayload(code, reason))
      l.sentClose = true
    }
    if (l.gotClose) l.socket.end()
    // A leg paused for back-pressure or a ledger wait must read the peer's close frame.
    l.socket.resume()
    this.#grace ??= setTimeout(() => {
      for (const s of Object.values(this.#legs)) s.socket.destroy()
    }, CLOSE_GRACE_MS)
    this.#grace.unref()
  }

  #onSocketClose(leg: Leg): void {
    const l = this.#legs[leg]
    if (l.closed) return
    l.closed = true
    // 1006: the leg went away without a close frame (never sent on the wire).
    if (!l.gotClose) {
      if (leg === 'agent') this.#agentCode ??= 1006
      else this.#upstreamCode ??= 1006
    }
    if (!this.#closedBy) this.#passOn(leg, leg === 'upstream' ? CLOSE_UPSTREAM_GONE : CLOSE_GOING_AWAY)
    if (this.#legs.agent.closed && this.#legs.upstream.closed) this.#finish()
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
      to_upstream: { ...this.#lanes.to_upstream.flow, frames: this.#legs.agent.parser.frames },
      to_agent: { ...this.#lanes.to_agent.flow, frames: this.#legs.upstream.parser.frames },
      pings: this.#pings,
      ...(this.#error ? { error: this.#error } : {}),
      ...(this.#counter ? { counter: this.#counter } : {}),
    })
  }
}
