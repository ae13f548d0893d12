// Response metering for budget counters: fed by the forward phase as the response is relayed
// (headers, each chunk, the end), it never holds a byte back. SSE counters use the policy's
// incremental meter; single-document counters keep a copy of the body (up to the inspection
// limit) to extract their value at the end; header counters and response.bytes need only the
// status, headers and size.
import type { CompiledCounter, CounterValue, HeaderMap, ResponseView, SseMeter } from '../policy/index.js'
import type { ResponseObserver } from './response-observer.js'

/** A kept body with no bytes: one shared empty buffer (the counters only read it). */
const NO_BODY = Buffer.alloc(0)

export class ResponseMeter implements ResponseObserver {
  readonly #counters: readonly CompiledCounter[]
  readonly #limit: number
  #view: ResponseView | undefined
  /** SSE counters' meters, made with the first (most responses meter none). */
  #meters: Map<string, SseMeter> | undefined
  #doc: Buffer[] | undefined
  #docBytes = 0
  #docOverflow = false
  #size = 0
  #complete = false
  #ended = false

  constructor(counters: readonly CompiledCounter[], inspectLimit: number) {
    this.#counters = counters
    this.#limit = inspectLimit
  }

  onHeaders(status: number, headers: Record<string, string | string[]>): void {
    this.#view = { status, headers: headers as HeaderMap, size: 0 }
    for (const c of this.#counters) {
      if (c.phase !== 'response_body' || !c.matchesStatus(status)) continue
      if (c.framing === 'sse') (this.#meters ??= new Map()).set(c.name, c.meter(this.#view))
      else this.#doc ??= []
    }
  }

  onChunk(chunk: Buffer): void {
    this.#size += chunk.length
    if (this.#meters) for (const m of this.#meters.values()) m.feed(chunk)
    if (this.#doc && !this.#docOverflow) {
      if (this.#docBytes + chunk.length > this.#limit) {
        this.#docOverflow = true
        this.#doc = []
      } else {
        this.#doc.push(chunk)
        this.#docBytes += chunk.length
      }
    }
  }

  onEnd(complete: boolean): void {
    this.#complete = complete
    this.#ended = true
  }

  /** Request-side amounts plus whatever the response produced; counters that saw no response debit 0 (or their request amount). */
  values(requestBytes: number, mcpTools?: readonly string[]): Map<string, CounterValue> {
    const out = new Map<string, CounterValue>()
    const view = this.#view ? { status: this.#view.status, headers: this.#view.headers, size: this.#size } : undefined
    for (const c of this.#counters) {
      if (c.phase === 'request') {
        out.set(c.name, { value: c.requestAmount(requestBytes, mcpTools) })
        continue
      }
      if (!view || !c.matchesStatus(view.status)) {
        out.set(c.name, { value: 0 })
        continue
      }
      if (c.phase === 'response_headers') {
        out.set(c.name, c.fromResponseHeaders(view))
      } else if (c.framing === 'sse') {
        const m = this.#meters?.get(c.name)
        out.set(c.name, m ? m.end() : { value: c.failureCharge, floored: 'terminator_not_observed' })
      } else {
        // A body we could not keep whole (too large, or the stream was cut) cannot be parsed.
        const body = this.#docOverflow || !this.#complete || !this.#ended ? '' : this.#doc?.length ? Buffer.concat(this.#doc, this.#docBytes) : NO_BODY
        out.set(c.name, c.fromDocument(view, body))
      }
    }
    return out
  }
}
