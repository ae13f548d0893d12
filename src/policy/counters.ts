// Compiled budget counters: status matching, request amounts, response-header values, JSON
// document extraction and incremental SSE metering. Pure: the proxy owns reservations, debits
// and storage. Extraction failures never throw; they floor the debit to failure_charge and name
// the reason with the spec's `floored` vocabulary.
//
// SSE semantics (docs/policy.md): events are parsed with eventsource-parser; `sse_event` narrows
// which events feed the value expression; the terminator (event type, data sentinel or
// terminal_cel) ends metering; an event whose value expression fails is skipped, and the failure
// only floors the result when no event produced a value at all.

import { createParser, type EventSourceMessage } from 'eventsource-parser'
import type { FlooredReason } from '../contract/index.js'
import { celToAmount, type CelProgram } from './cel.js'
import { CEL_CALL_BUDGET } from './cel-cost.js'
import { CelBudgetExceeded, withCelBudget } from './cel-meter.js'
import type { Accumulator, BudgetScope, CompiledCounter, CounterSource, CounterValue, HeaderMap, MessageDirection, MessageView, ResponseView, SseMeter } from './types.js'

export interface CounterSpec {
  name: string
  capability: string
  source: CounterSource
  phase: CompiledCounter['phase']
  framing?: 'single_document' | 'sse'
  direction?: MessageDirection
  accumulator?: Accumulator
  workspace?: BudgetScope
  task?: BudgetScope
  reservePerRequest: number
  failureCharge: number
  maxConcurrent: number
  statusCodes: string[]
  value?: CelProgram
  sseEvent?: string
  terminalEventType?: string
  terminalSentinel?: string
  terminalCel?: CelProgram
  /** mcp.calls: the tool names counted (exact); undefined counts every tools/call. */
  tools?: readonly string[]
}

type Range = [number, number]

/** Parses status_codes entries (`200`, `200-299`, `2xx`) into ranges; undefined if any is invalid. */
export function parseStatusCodes(codes: readonly string[]): Range[] | undefined {
  const out: Range[] = []
  for (const c of codes) {
    let m: RegExpExecArray | null
    if ((m = /^([1-5])xx$/i.exec(c))) out.push([Number(m[1]) * 100, Number(m[1]) * 100 + 99])
    else if ((m = /^(\d{3})-(\d{3})$/.exec(c))) {
      const lo = Number(m[1])
      const hi = Number(m[2])
      if (lo < 100 || hi > 599 || lo > hi) return undefined
      out.push([lo, hi])
    } else if (/^\d{3}$/.test(c)) {
      const n = Number(c)
      if (n < 100 || n > 599) return undefined
      out.push([n, n])
    } else return undefined
  }
  return out
}

function joinHeaders(h: HeaderMap): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(h)) out[k.toLowerCase()] = typeof v === 'string' ? v : v.join(', ')
  return out
}

function responseVar(r: ResponseView, body?: unknown): Record<string, unknown> {
  return { status: BigInt(r.status), headers: joinHeaders(r.headers), size: BigInt(Math.max(0, Math.floor(r.size))), ...(body !== undefined ? { body } : {}) }
}

function header(r: ResponseView, name: string): string {
  const v = r.headers[name]
  return (typeof v === 'string' ? v : v?.join(', ')) ?? ''
}

function mediaType(r: ResponseView): string {
  const v = header(r, 'content-type')
  const semi = v.indexOf(';')
  return (semi < 0 ? v : v.slice(0, semi)).trim().toLowerCase()
}

function isJsonType(t: string): boolean {
  return t === 'application/json' || (t.startsWith('application/') && t.endsWith('+json'))
}

function encodingOk(r: ResponseView): boolean {
  const e = header(r, 'content-encoding').trim().toLowerCase()
  return e === '' || e === 'identity'
}

function accumulate(acc: Accumulator | undefined, prev: number | undefined, v: number): number {
  if (prev === undefined) return v
  if (acc === 'sum') return Math.min(prev + v, Number.MAX_SAFE_INTEGER)
  if (acc === 'last') return v
  return Math.max(prev, v)
}

export function makeCounter(spec: CounterSpec): CompiledCounter {
  const ranges = parseStatusCodes(spec.statusCodes) ?? []
  const floor = (reason: FlooredReason, extracted = 0): CounterValue => ({ value: Math.max(extracted, spec.failureCharge), floored: reason })
  const finish = (v: number): CounterValue => (spec.failureCharge > 0 && v < spec.failureCharge ? floor('extracted_below_failure_charge', v) : { value: v })

  const evalValue = (vars: Record<string, unknown>): number | undefined => {
    try {
      return celToAmount(spec.value!.run(vars))
    } catch {
      return undefined
    }
  }

  const counter: CompiledCounter = {
    name: spec.name,
    capability: spec.capability,
    source: spec.source,
    phase: spec.phase,
    ...(spec.framing ? { framing: spec.framing } : {}),
    ...(spec.direction ? { direction: spec.direction } : {}),
    ...(spec.accumulator ? { accumulator: spec.accumulator } : {}),
    ...(spec.workspace ? { workspace: Object.freeze({ ...spec.workspace }) } : {}),
    ...(spec.task ? { task: Object.freeze({ ...spec.task }) } : {}),
    reservePerRequest: spec.reservePerRequest,
    failureCharge: spec.failureCharge,
    maxConcurrent: spec.maxConcurrent,
    statusCodes: Object.freeze([...spec.statusCodes]),

    matchesStatus(status: number): boolean {
      if (spec.phase === 'request' || spec.phase === 'websocket') return true
      for (const [lo, hi] of ranges) if (status >= lo && status <= hi) return true
      return false
    },

    requestAmount(bodyBytes: number, mcpTools?: readonly string[]): number {
      if (spec.source === 'request.count') return 1
      if (spec.source === 'mcp.calls') return (mcpTools ?? []).filter((t) => spec.tools === undefined || spec.tools.includes(t)).length
      if (spec.source === 'request.bytes') return Math.max(0, Math.floor(bodyBytes))
      return 0
    },

    fromResponseHeaders(response: ResponseView): CounterValue {
      if (spec.source === 'response.bytes') return { value: Math.max(0, Math.floor(response.size)) }
      if (spec.phase !== 'response_headers' || !spec.value) return { value: 0 }
      const v = evalValue({ response: responseVar(response) })
      return v === undefined ? floor('cel_eval_error') : finish(v)
    },

    fromDocument(response: ResponseView, body: Uint8Array | string): CounterValue {
      if (spec.phase !== 'response_body' || spec.framing !== 'single_document' || !spec.value) return { value: 0 }
      const type = mediaType(response)
      if (type === 'text/event-stream') return floor('framing_mismatch')
      if (!isJsonType(type)) return floor('format_mismatch')
      if (!encodingOk(response)) return floor('encoding_mismatch')
      let doc: unknown
      try {
        doc = JSON.parse(typeof body === 'string' ? body : Buffer.from(body).toString('utf8'))
      } catch {
        return floor('parse_failed')
      }
      const v = evalValue({ response: responseVar(response, doc) })
      return v === undefined ? floor('cel_eval_error') : finish(v)
    },

    meter(response: ResponseView): SseMeter {
      return new Meter(spec, response, floor, finish)
    },

    fromMessage(message: MessageView): number | 'parse_failed' | 'cel_eval_error' {
      return messageAmount(spec, message)
    },
  }
  return Object.freeze(counter)
}

class Meter implements SseMeter {
  #terminated = false
  #value: number | undefined
  #failure: FlooredReason | undefined
  #mismatch: FlooredReason | undefined
  /** A chunk went over the CEL budget: events were left uncounted, so the total is a floor. */
  #cut = false
  // Built only when the response can be metered: a mismatched one (a JSON answer to an SSE
  // counter) feeds nothing and needs no decoder, parser or response variable.
  #decoder: InstanceType<typeof TextDecoder> | undefined
  #parser: ReturnType<typeof createParser> | undefined
  #resp: Record<string, unknown> | undefined

  constructor(
    private readonly spec: CounterSpec,
    response: ResponseView,
    private readonly floor: (r: FlooredReason, v?: number) => CounterValue,
    private readonly finish: (v: number) => CounterValue,
  ) {
    const type = mediaType(response)
    if (spec.phase !== 'response_body' || spec.framing !== 'sse') this.#mismatch = 'framing_mismatch'
    else if (type !== 'text/event-stream') this.#mismatch = isJsonType(type) ? 'framing_mismatch' : 'format_mismatch'
    else if (!encodingOk(response)) this.#mismatch = 'encoding_mismatch'
    if (this.#mismatch) return
    this.#resp = responseVar(response)
    this.#decoder = new TextDecoder()
    this.#parser = createParser({ onEvent: (e) => this.#onEvent(e) })
  }

  get terminated(): boolean {
    return this.#terminated
  }

  // One CEL budget scope per chunk: the events of one chunk share CEL_CALL_BUDGET, so a chunk of
  // many events cannot hold the event loop longer than one proxy phase may.
  feed(chunk: Uint8Array | string): void {
    if (this.#mismatch || this.#terminated) return
    withCelBudget(CEL_CALL_BUDGET, () => {
      try {
        this.#parser!.feed(typeof chunk === 'string' ? chunk : this.#decoder!.decode(chunk, { stream: true }))
      } catch {
        this.#failure ??= 'parse_failed'
      }
    })
  }

  #onEvent(e: EventSourceMessage): void {
    if (this.#terminated) return
    const spec = this.spec
    const type = e.event ?? 'message'
    if (spec.terminalSentinel !== undefined && e.data.trim() === spec.terminalSentinel) {
      this.#terminated = true
      return
    }
    let data: unknown
    let parsed = true
    try {
      data = JSON.parse(e.data)
    } catch {
      parsed = false
      data = e.data
    }
    const event = { type, id: e.id ?? '', data, raw: e.data }
    if (spec.sseEvent === undefined || spec.sseEvent === type) {
      if (!parsed) this.#failure ??= 'parse_failed'
      else {
        let v: number | undefined
        try {
          v = celToAmount(spec.value!.run({ response: this.#resp!, event }))
        } catch (e) {
          if (e instanceof CelBudgetExceeded) this.#cut = true
          v = undefined
        }
        if (v === undefined) this.#failure ??= 'cel_eval_error'
        else this.#value = accumulate(spec.accumulator, this.#value, v)
      }
    }
    if (spec.terminalEventType !== undefined && type === spec.terminalEventType) this.#terminated = true
    else if (spec.terminalCel) {
      try {
        if (spec.terminalCel.run({ response: this.#resp!, event }) === true) this.#terminated = true
      } catch {
        // A failing terminal_cel does not end the stream; terminator_not_observed reports it at end().
      }
    }
  }

  end(): CounterValue {
    if (this.#mismatch) return this.floor(this.#mismatch)
    if (!this.#terminated) return this.floor('terminator_not_observed', this.#value ?? 0)
    if (this.#cut) return this.floor('cel_eval_error', this.#value ?? 0)
    if (this.#value === undefined) return this.floor(this.#failure ?? 'cel_eval_error')
    return this.finish(this.#value)
  }
}

/**
 * What one WebSocket message adds to a websocket.* counter: 1 (messages), its payload size
 * (bytes), or `value` over `event` (message): a binary or non-JSON message is parse_failed, a
 * failing or negative `value` cel_eval_error (the caller charges failure_charge and floors).
 */
function messageAmount(spec: CounterSpec, message: MessageView): number | 'parse_failed' | 'cel_eval_error' {
  const dir = spec.direction ?? 'both'
  if (dir !== 'both' && dir !== message.direction) return 0
  if (spec.source === 'websocket.messages') return 1
  if (spec.source === 'websocket.bytes') return message.data.length
  if (spec.source !== 'websocket.message' || !spec.value) return 0
  if (!message.text) return 'parse_failed'
  let data: unknown
  const raw = message.data.toString('utf8')
  try {
    data = JSON.parse(raw)
  } catch {
    return 'parse_failed'
  }
  const event = { type: data !== null && typeof data === 'object' && typeof (data as { type?: unknown }).type === 'string' ? (data as { type: string }).type : '', data, raw, direction: message.direction, size: BigInt(message.data.length) }
  try {
    return withCelBudget(CEL_CALL_BUDGET, () => celToAmount(spec.value!.run({ event }))) ?? 'cel_eval_error'
  } catch {
    return 'cel_eval_error'
  }
}
