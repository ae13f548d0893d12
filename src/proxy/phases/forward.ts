// Forward: send the (possibly transformed) request upstream through the pooled client and relay
// the response as it arrives (response_headers, then response_body). Bodies stream in both
// directions unless an earlier phase buffered the request body; SSE events are written to the
// client chunk by chunk, never held back.
import { pipeline, type Readable, type Transform } from 'node:stream'
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib'
import { destinationRefusal } from '../address-guard.js'
import { deny } from '../decision.js'
import type { ProxyCore, RequestState } from '../request-state.js'
import { HOP_BY_HOP } from '../upstream.js'
import type { ResponseObserver } from '../response-observer.js'
import { Scrubber } from '../scrub.js'

export async function forward(core: ProxyCore, st: RequestState, observer?: ResponseObserver): Promise<void> {
  const { ctx, entry, req, res } = st
  const out = st.transformed
  const path = out ? out.path : ctx.path
  const rawQuery = out ? out.rawQuery : st.policyRequest!.rawQuery
  const origin = `${entry.scheme}://${entry.host.includes(':') ? `[${entry.host}]` : entry.host}:${entry.port}`
  const hostHeader = entry.tunnel ? (req.headers.host ?? entry.host) : hostOf(req.url!) ?? entry.host

  let body: Buffer | Readable | AsyncIterable<Buffer> | undefined
  if (st.outgoingBody) body = st.outgoingBody
  else if (st.body) body = st.body.length ? st.body : undefined
  else if (hasBody(req)) {
    // A declared length is forwarded as is and the stream handed to undici untouched (fast
    // path); only chunked bodies go through the counting generator.
    const declared = Number(req.headers['content-length'])
    if (Number.isFinite(declared) && declared >= 0) {
      body = req
      st.requestBytes = declared
      st.headers['content-length'] = String(declared)
    } else body = counted(req, st, core.limits.maxBodyBytes)
  }
  if (Buffer.isBuffer(body)) st.requestBytes = body.length

  let upstream
  try {
    upstream = await core.upstream.send({
      origin,
      method: out?.method ?? ctx.method,
      path: rawQuery ? `${path}?${rawQuery}` : path,
      host: hostHeader,
      headers: st.headers,
      body,
      signal: st.abort,
      ...(ctx.match?.allowPrivate ? { allowPrivate: ctx.match.allowPrivate } : {}),
    })
  } catch (err) {
    // The address check refused the connection: a policy outcome, not an upstream failure.
    const refused = destinationRefusal(err)
    if (refused) throw deny('destination_private', { address: refused.address, port: refused.port, ...(refused.own ? { listener: 'corral' } : {}) })
    throw err
  }

  ctx.phase = 'response_headers'
  st.responseStatus = upstream.status
  let headers: Record<string, string | string[]> = {}
  for (const [k, v] of Object.entries(upstream.headers)) if (!HOP_BY_HOP.has(k) || k === 'content-length') headers[k] = v
  let src: Readable = upstream.body
  // Something was injected: its bytes are masked in the response (scrub.ts), only then.
  const scrubber = st.injected?.length ? new Scrubber(st.injected) : undefined
  if (scrubber) ({ headers, src } = scrubbed(st, scrubber, headers, upstream.body))
  observer?.onHeaders(upstream.status, headers)
  res.writeHead(upstream.status, headers)

  ctx.phase = 'response_body'
  let metered = false
  // The upstream body ended: meter it, then let the runner record the row before the client's
  // response ends (a row refused by the audit log cuts the response instead: runner.ts).
  const beforeEnd = async (): Promise<boolean> => {
    metered = true
    if (scrubber?.count) ctx.detail.scrubbed = scrubber.count
    observer?.onEnd(true)
    return st.beforeEnd ? st.beforeEnd() : true
  }
  try {
    await relay(src, res, (chunk) => {
      st.responseBytes += chunk.length
      observer?.onChunk(chunk)
    }, beforeEnd)
  } catch (err) {
    if (!metered) observer?.onEnd(false)
    throw err
  } finally {
    if (scrubber?.count) ctx.detail.scrubbed = scrubber.count
  }
}

/**
 * Masks injected bytes in the headers and sets up the body scan. A body the scan cannot read
 * (an encoding other than gzip, deflate or br, though `accept-encoding: identity` was asked) is
 * refused: the agent gets a 502, never bytes that were not scanned.
 */
function scrubbed(st: RequestState, scrubber: Scrubber, headers: Record<string, string | string[]>, body: Readable): { headers: Record<string, string | string[]>; src: Readable } {
  const raw = headers['content-encoding']
  const encoding = (Array.isArray(raw) ? raw.join(',') : raw ?? '').trim().toLowerCase()
  let decoder: Transform | undefined
  if (encoding !== '' && encoding !== 'identity') {
    decoder = encoding === 'gzip' || encoding === 'x-gzip' ? createGunzip() : encoding === 'deflate' ? createInflate() : encoding === 'br' ? createBrotliDecompress() : undefined
    if (!decoder) {
      body.once('error', () => {}).destroy()
      st.ctx.detail.unscrubbable_encoding = encoding.slice(0, 40)
      throw Object.assign(new Error('a response body in an encoding the scrubber cannot read'), { code: 'UNSCRUBBABLE_ENCODING' })
    }
    // The agent gets the decoded body: its length is unknown until the end.
    delete headers['content-encoding']
    delete headers['content-length']
  }
  const scan = scrubber.stream()
  // The usual case (identity) is linked by hand: pipeline() costs an AbortController (and a
  // DOMException) per call, which showed up in the proxy's profile for every scrubbed response.
  const src = decoder ? pipeline(body, decoder, scan, () => {}) : link(body, scan)
  return { headers: scrubber.headers(headers), src }
}

/**
 * `from.pipe(to)` with pipeline's failure rules: an error or a premature close of `from` destroys
 * `to` (so the relay sees the failure, never a body that looks complete), and `to` closing early
 * (the client left) destroys `from`.
 */
function link(from: Readable, to: Transform): Transform {
  from.once('error', (err: Error) => to.destroy(err))
  from.once('close', () => {
    if (!from.readableEnded) to.destroy(Object.assign(new Error('upstream body closed early'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }))
  })
  to.once('close', () => {
    if (!from.destroyed) from.destroy()
  })
  return from.pipe(to)
}

/**
 * Relays the upstream body to the client chunk by chunk with backpressure, like
 * `pipeline(src, res)` but without its per-call AbortController and async-iterator machinery
 * (they showed up in the profile). Rejects when either side breaks before the end and then
 * destroys the other side, so a client that leaves cuts the upstream and a cut upstream cuts
 * the client (never a truncated response that looks complete). `beforeEnd` runs between the
 * upstream's end and the client's: false cuts the client instead of ending its response.
 */
function relay(src: Readable, res: RequestState['res'], onChunk: (chunk: Buffer) => void, beforeEnd: () => Promise<boolean>): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let done = false
    const finish = (err?: Error): void => {
      if (done) return
      done = true
      src.off('data', onData).off('end', onEnd).off('error', onSrcError).off('close', onSrcClose)
      res.off('drain', onDrain).off('close', onResClose).off('error', onResError).off('finish', onResFinish)
      if (err) {
        src.destroy()
        res.destroy()
        reject(err)
      } else resolve()
    }
    const onData = (chunk: Buffer): void => {
      onChunk(chunk)
      if (!res.write(chunk)) src.pause()
    }
    const onDrain = (): void => void src.resume()
    // Settles on the response's 'finish', or (premature) 'close', whichever comes first.
    const onEnd = (): void => {
      beforeEnd().then(
        (ok) => (ok ? void res.end() : finish(Object.assign(new Error('decision row not recorded'), { code: 'ERR_AUDIT_UNAVAILABLE' }))),
        (err: Error) => finish(err),
      )
    }
    const onResFinish = (): void => finish()
    const onSrcError = (err: Error): void => finish(err)
    const onSrcClose = (): void => {
      if (!src.readableEnded) finish(Object.assign(new Error('upstream body closed early'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }))
    }
    const onResClose = (): void => {
      if (!res.writableFinished) finish(Object.assign(new Error('client closed the response early'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }))
    }
    const onResError = (err: Error): void => finish(err)
    src.on('data', onData).once('end', onEnd).once('error', onSrcError).once('close', onSrcClose)
    res.on('drain', onDrain).once('close', onResClose).once('error', onResError).once('finish', onResFinish)
    // The client may have left while the upstream answered: its 'close' has already fired.
    if (res.destroyed) onResClose()
  })
}

function hasBody(req: RequestState['req']): boolean {
  const h = req.headers
  return (h['content-length'] !== undefined && h['content-length'] !== '0') || h['transfer-encoding'] !== undefined
}

/** Streams the client's body upstream while counting it (request.bytes), up to maxBytes (limits.ts). */
function counted(req: RequestState['req'], st: RequestState, maxBytes: number): AsyncIterable<Buffer> {
  const gen = async function* (): AsyncGenerator<Buffer> {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      st.requestBytes += chunk.length
      if (st.requestBytes > maxBytes) {
        st.bodyLimitHit = true
        throw new Error('request body over the proxy limit')
      }
      yield chunk
    }
  }
  return gen()
}

function hostOf(absoluteUrl: string): string | undefined {
  try {
    return new URL(absoluteUrl).host
  } catch {
    return undefined
  }
}
