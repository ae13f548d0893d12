// Phase response_headers: the upstream's status and headers reach the client (hop-by-hop headers
// dropped) and the response meter sees them. When the proxy injected something (credentials,
// secret values), its bytes are masked in the headers here and a scan is set up for the body
// (scrub.ts); a body the scan cannot read is refused before anything is written.
import { pipeline, type Transform } from 'node:stream'
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib'
import type { PhaseOutcome } from '../decision.js'
import { trailersOnly } from '../trailers.js'
import type { ProxyCore, RelayedBody, RequestState } from '../request-state.js'
import { Scrubber } from '../scrub.js'
import { HOP_BY_HOP, type UpstreamResponse } from '../upstream.js'

/** Writes the head of `st.response` to the client and sets `st.relayed`, the body to relay. */
export function responseHeaders(_core: ProxyCore, st: RequestState): PhaseOutcome {
  const upstream = st.response!
  const observer = st.meter
  st.responseStatus = upstream.status
  st.ctx.upstreamStatus = upstream.status
  // Something was injected: its bytes are masked in the response (scrub.ts), only then.
  const scrubber = st.injected?.length ? new Scrubber(st.injected) : undefined
  let headers: Record<string, string | string[]> = {}
  const from = upstream.headers
  // A mask is not as long as what it hides: a scanned body's length is known only at the end, so
  // its Content-Length is left out here (not deleted later: a delete slows every later pass).
  for (const k in from) if (!HOP_BY_HOP.has(k) || (k === 'content-length' && !scrubber)) headers[k] = from[k]!
  const body: RelayedBody = scrubber ? scrubbed(st, scrubber, headers, upstream, Number(from['content-length'])) : { src: upstream.direct ?? upstream.body }
  if (scrubber) headers = scrubber.headers(headers)
  // A trailers-only gRPC answer (its status in the headers) is relayed as headers plus trailers.
  if (st.ctx.protocol) trailersOnly(headers, upstream.trailers)
  observer?.onHeaders(upstream.status, headers)
  st.res.writeHead(upstream.status, headers)
  st.relayed = body
  return undefined
}

/**
 * Sets up the body scan (the headers are masked by the caller; `declared` is the upstream's
 * Content-Length, not among them). A body the scan cannot read (an
 * encoding other than gzip, deflate or br, though `accept-encoding: identity` was asked) is
 * refused: the agent gets a 502, never bytes that were not scanned. An identity body is scanned
 * by the relay chunk by chunk (no stream in between); a compressed one is decoded and scanned
 * in a pipeline.
 */
function scrubbed(st: RequestState, scrubber: Scrubber, headers: Record<string, string | string[]>, upstream: UpstreamResponse, declared: number): RelayedBody {
  const raw = headers['content-encoding']
  const encoding = (Array.isArray(raw) ? raw.join(',') : raw ?? '').trim().toLowerCase()
  if (encoding === '' || encoding === 'identity') {
    return { src: upstream.direct ?? upstream.body, scrubber, scan: scrubber.scan(), length: declared > 0 && Number.isSafeInteger(declared) ? declared : undefined }
  }
  const decoder: Transform | undefined = encoding === 'gzip' || encoding === 'x-gzip' ? createGunzip() : encoding === 'deflate' ? createInflate() : encoding === 'br' ? createBrotliDecompress() : undefined
  if (!decoder) {
    if (upstream.direct) upstream.direct.destroy()
    else upstream.body.once('error', () => {}).destroy()
    st.ctx.detail.unscrubbable_encoding = encoding.slice(0, 40)
    throw Object.assign(new Error('a response body in an encoding the scrubber cannot read'), { code: 'UNSCRUBBABLE_ENCODING' })
  }
  // The agent gets the decoded body.
  delete headers['content-encoding']
  return { src: pipeline(upstream.body, decoder, scrubber.stream(), () => {}), scrubber }
}
