// One answer of the pooled HTTP/1.1 client, as undici's dispatch handler: the handler is the
// response itself, so a request costs no `request()` wrapper (its AsyncResource, callback and
// abort listener) and no body stream. The body reaches the relay through `attach`, a sink called
// per chunk as the parser reads it; a consumer that needs a stream (the MCP filter, a decoder)
// reads `body`, built on first use and fed by the same sink. Backpressure is the sink's: a chunk
// it refuses pauses undici's parser (and so the upstream socket) until `resume`.
import { Readable } from 'node:stream'
import { errors, util, type Dispatcher } from 'undici'

/** Where an attached body goes: `data` false asks for a pause until the body's `resume`. */
export interface BodySink {
  data(chunk: Buffer): boolean
  end(): void
  error(err: Error): void
}

/** An upstream body read without a stream (the pooled client's); see PooledResponse. */
export interface DirectBody {
  /** Hands what arrived so far to `sink` at once, then each chunk as it arrives. Once only. */
  attach(sink: BodySink): void
  resume(): void
  /** Cuts the upstream exchange (its connection is not reused); nothing more reaches the sink. */
  destroy(err?: Error): void
}

const NO_HEADERS: Record<string, string | string[]> = Object.freeze({})

/** What the handler keeps before a sink is attached before it pauses the upstream (a stream's default mark). */
const QUEUE_MAX = 65_536

type Settle = (err: Error | undefined, res: PooledResponse | undefined) => void

export class PooledResponse implements DirectBody {
  status = 0
  /** Set with the head (onHeaders), before anyone can read it. */
  headers: Record<string, string | string[]> = NO_HEADERS
  /** Over HTTP/1.1 the client's trailers are not relayed (upstream.ts). */
  readonly trailers: Record<string, string | string[]> = {}
  #settle: Settle | undefined
  #signal: ClientSignal | undefined
  /** The request's body when it is a stream: cut with the exchange, as undici's request() does. */
  #requestBody: Readable | undefined
  #abort: ((err: Error) => void) | undefined
  #resume: (() => void) | undefined
  #sink: BodySink | undefined
  #queue: Buffer[] | undefined
  #queued = 0
  #ended = false
  #error: Error | undefined
  /** Completed, failed or cut: later callbacks and calls do nothing. */
  #finished = false
  #paused = false
  #inData = false
  #resumeAsked = false
  #stream: Readable | undefined

  constructor(settle: Settle, signal: ClientSignal | undefined, requestBody: unknown) {
    this.#settle = settle
    this.#signal = signal
    if (requestBody instanceof Readable) this.#requestBody = requestBody
  }

  /** The body for the relay to read without a stream; undefined once `body` was read or replaced. */
  get direct(): DirectBody | undefined {
    return this.#stream ? undefined : this
  }

  /** The body as a stream, built on first read; a consumer may replace it with its own view. */
  get body(): Readable {
    if (this.#stream) return this.#stream
    const stream = new Readable({
      read: () => this.resume(),
      destroy: (err, cb) => {
        this.destroy(err ?? undefined)
        cb(err)
      },
    })
    this.#stream = stream
    this.attach({ data: (c) => stream.push(c), end: () => void stream.push(null), error: (e) => void stream.destroy(e) })
    return stream
  }

  set body(stream: Readable) {
    this.#stream = stream
  }

  attach(sink: BodySink): void {
    this.#sink = sink
    const queue = this.#queue
    let ok = true
    if (queue) {
      this.#queue = undefined
      this.#queued = 0
      for (const chunk of queue) ok = sink.data(chunk)
    }
    if (this.#ended) return sink.end()
    if (this.#error) return sink.error(this.#error)
    if (!ok) this.#paused = true
    else this.resume()
  }

  resume(): void {
    // Asked from within the sink's own `data` (not expected of a socket's drain): that call answers true instead.
    if (this.#inData) {
      this.#resumeAsked = true
      return
    }
    if (!this.#paused) return
    this.#paused = false
    this.#resume?.()
  }

  destroy(err?: Error): void {
    if (this.#finished) return
    this.#finish()
    this.#abort?.(err ?? new errors.RequestAbortedError())
  }

  /** Once the exchange is over its connection may carry another request: this one's resume must not touch its parser. */
  #finish(): void {
    this.#finished = true
    this.#paused = false
    this.#resume = undefined
  }

  // undici's handler interface.

  onConnect(abort: (err: Error) => void): void {
    const signal = this.#signal
    if (signal && (signal as { aborted?: boolean }).aborted) return abort(new errors.RequestAbortedError())
    this.#abort = abort
    if (!signal) return
    this.#signal = undefined
    // The client left before the answer was complete: the upstream exchange is cut.
    const onAbort = (): void => this.destroy()
    if (signal instanceof AbortSignal) signal.addEventListener('abort', onAbort, { once: true })
    else signal.on('abort', onAbort)
  }

  onHeaders(status: number, rawHeaders: Buffer[], resume: () => void): boolean {
    if (status < 200) return true
    this.status = status
    this.headers = util.parseHeaders(rawHeaders) as Record<string, string | string[]>
    this.#resume = resume
    const settle = this.#settle!
    this.#settle = undefined
    settle(undefined, this)
    return true
  }

  onData(chunk: Buffer): boolean {
    const sink = this.#sink
    if (sink) {
      this.#inData = true
      const ok = sink.data(chunk)
      this.#inData = false
      if (ok || this.#resumeAsked) {
        this.#resumeAsked = false
        return true
      }
      this.#paused = true
      return false
    }
    ;(this.#queue ??= []).push(chunk)
    this.#queued += chunk.length
    if (this.#queued < QUEUE_MAX) return true
    this.#paused = true
    return false
  }

  onComplete(): void {
    if (this.#finished) return
    this.#finish()
    if (this.#sink) this.#sink.end()
    else this.#ended = true
  }

  onError(err: Error): void {
    const body = this.#requestBody
    if (body) {
      this.#requestBody = undefined
      body.on('error', noop).destroy(err)
    }
    const settle = this.#settle
    if (settle) {
      this.#settle = undefined
      this.#finish()
      return settle(err, undefined)
    }
    if (this.#finished) return
    this.#finish()
    if (this.#sink) this.#sink.error(err)
    else this.#error = err
  }
}

/** The request's "client gone" signal: request-state.ts's ClientGone (its 'abort' fires once) or an AbortSignal. */
export type ClientSignal = AbortSignal | { readonly aborted: boolean; on(event: 'abort', fn: () => void): unknown }

const noop = (): void => {}

/** Sends one request through `dispatcher`; resolves with its answer once the head has arrived. */
export function dispatchPooled(dispatcher: Dispatcher, opts: Dispatcher.DispatchOptions, signal: ClientSignal | undefined): Promise<PooledResponse> {
  return new Promise((resolve, reject) => {
    const handler = new PooledResponse((err, res) => (err ? reject(err) : resolve(res!)), signal, opts.body)
    dispatcher.dispatch(opts, handler as unknown as Dispatcher.DispatchHandler)
  })
}
