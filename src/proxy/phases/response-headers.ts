// Phase response_headers: the upstream's status and headers reach the client (hop-by-hop headers
// dropped) and the response meter sees them. When the proxy injected something (credentials,
// secret values), its bytes are masked in the headers here and a scan is set up for the body
// (scrub.ts); a body the scan cannot read is refused before anything is written.
import { pipeline, type Readable, type Transform } from 'node:stream'
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib'
import type { RequestState } from '../request-state.js'
import type { ResponseObserver } from '../response-observer.js'
import { Scrubber } from '../scrub.js'
import { HOP_BY_HOP, type UpstreamResponse } from '../upstream.js'

/** The body the response_body phase relays: the upstream's, or its scrubbed view. */
export interface RelayedBody {
  src: Readable
  scrubber?: Scrubber
}

export function responseHeaders(st: RequestState, upstream: UpstreamResponse, observer?: ResponseObserver): RelayedBody {
  st.responseStatus = upstream.status
  let headers: Record<string, string | string[]> = {}
  for (const [k, v] of Object.entries(upstream.headers)) if (!HOP_BY_HOP.has(k) || k === 'content-length') headers[k] = v
  let src: Readable = upstream.body
  // Something was injected: its bytes are masked in the response (scrub.ts), only then.
  const scrubber = st.injected?.length ? new Scrubber(st.injected) : undefined
  if (scrubber) ({ headers, src } = scrubbed(st, scrubber, headers, upstream.body))
  observer?.onHeaders(upstream.status, headers)
  st.res.writeHead(upstream.status, headers)
  return scrubber ? { src, scrubber } : { src }
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
