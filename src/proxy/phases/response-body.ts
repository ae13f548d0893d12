// Phase response_body: the upstream body is relayed to the client chunk by chunk as it arrives
// (SSE events are never held back) while the response meter counts it. When the upstream body
// has ended, the runner records the row before the client's response is ended (st.beforeEnd); a
// row the audit log refused cuts the response instead of completing it.
import { Readable } from 'node:stream'
import type { PhaseOutcome } from '../decision.js'
import { relayTrailers } from '../trailers.js'
import type { ProxyCore, RequestState } from '../request-state.js'
import type { BodyScan } from '../scrub.js'
import type { BodySink, DirectBody } from '../pooled-response.js'

/** Relays `st.relayed` to the client; a break on either side is thrown (a fault, not a denial). */
export async function responseBody(core: ProxyCore, st: RequestState): Promise<PhaseOutcome> {
  const { ctx, res } = st
  const observer = st.meter
  const { src, scrubber, scan, length } = st.relayed!
  let metered = false
  // Not async: the row's promise is handed on as it is (a throw before it is a rejection still).
  const beforeEnd = (): Promise<boolean> => {
    try {
      metered = true
      ctx.responseComplete = true
      if (scrubber?.count) ctx.detail.scrubbed = scrubber.count
      // The upstream's trailers (gRPC's status) go to an HTTP/2 client with the end of its stream.
      if (ctx.protocol) relayTrailers(st, scrubber)
      observer?.onEnd(true)
      return st.beforeEnd ? st.beforeEnd(core, st) : Promise.resolve(true)
    } catch (err) {
      return Promise.reject(err as Error)
    }
  }
  try {
    await relay(src, res, (chunk) => {
      st.responseBytes += chunk.length
      observer?.onChunk(chunk)
    }, beforeEnd, scan, length)
  } catch (err) {
    if (!metered) observer?.onEnd(false)
    throw err
  } finally {
    if (scrubber?.count) ctx.detail.scrubbed = scrubber.count
  }
  return undefined
}

/**
 * Relays the upstream body to the client chunk by chunk with backpressure, like
 * `pipeline(src, res)` but without its per-call AbortController and async-iterator machinery.
 * The pooled client's body is read without a stream (pooled-response.ts: its chunks come straight
 * from undici's parser, a refused write pauses the parser); any other body is a stream. Rejects
 * when either side breaks before the end and then destroys the other side, so a client that
 * leaves cuts the upstream and a cut upstream cuts the client (never a truncated response that
 * looks complete). `beforeEnd` runs between the upstream's end and the client's: false cuts the
 * client instead of ending its response. `scan` (an identity body's credential scan) is applied
 * to each chunk before it is counted and sent. With `length` (the upstream's declared length, the
 * client's copy chunked) the chunk that completes the body is counted at once but sent with the
 * end: one write carries it and the chunked terminator instead of two (each a TLS record and a
 * syscall).
 */
function relay(src: Readable | DirectBody, res: RequestState['res'], onChunk: (chunk: Buffer) => void, beforeEnd: () => Promise<boolean>, scan?: BodyScan, length?: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let done = false
    let received = 0
    let last: Buffer | undefined
    let draining = false
    const onDrain = (): void => {
      draining = false
      src.resume()
    }
    const finish = (err?: Error): void => {
      if (done) return
      done = true
      // The listeners stay: both sides are this request's own and die with it, and a late
      // event (the 'close' or 'error' of a destroy below) finds the relay done.
      if (err) {
        src.destroy()
        res.destroy()
        reject(err)
      } else resolve()
    }
    const sink: BodySink = {
      // False: the source pauses until the client's 'drain'.
      data(chunk: Buffer): boolean {
        if (done) return true
        // A chunk the scan holds back whole (it may begin a needle) sends nothing yet.
        const out = scan ? scan.push(chunk) : chunk
        received += chunk.length
        if (length !== undefined && received >= length) {
          onChunk(out)
          last = last ? Buffer.concat([last, out]) : out
          return true
        }
        if (out.length === 0) return true
        onChunk(out)
        if (res.write(out)) return true
        // The client's socket is full: the source waits for its 'drain', listened for only now.
        if (!draining) {
          draining = true
          res.once('drain', onDrain)
        }
        return false
      },
      end(): void {
        if (done) return
        // What the scan held back (it could have begun a needle) goes out masked before the end.
        const tail = scan?.end()
        if (tail?.length) {
          onChunk(tail)
          last = last ? Buffer.concat([last, tail]) : tail
        }
        // Settles on the response's 'finish', or (premature) 'close', whichever comes first.
        beforeEnd().then(
          (ok) => (ok ? void (last?.length ? res.end(last) : res.end()) : finish(Object.assign(new Error('decision row not recorded'), { code: 'ERR_AUDIT_UNAVAILABLE' }))),
          (err: Error) => finish(err),
        )
      },
      error: finish,
    }
    const onResClose = (): void => {
      if (!res.writableFinished) finish(Object.assign(new Error('client closed the response early'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }))
    }
    // `on`, not `once`: each fires once or finds the relay done, and once's wrappers cost per request.
    // 'drain' is listened for only after a refused write (sink.data).
    res.on('close', onResClose).on('error', finish).on('finish', () => finish())
    // The client may have left while the upstream answered: its 'close' has already fired.
    if (res.destroyed) return onResClose()
    if (!(src instanceof Readable)) return src.attach(sink)
    src.on('data', (chunk: Buffer) => void (sink.data(chunk) || src.pause())).once('end', sink.end).once('error', finish).once('close', () => {
      if (!src.readableEnded) finish(Object.assign(new Error('upstream body closed early'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }))
    })
  })
}
