// Trailers, relayed to an HTTP/2 client at the end of its stream: gRPC puts its status there, so
// a proxy that drops them turns every call into an error. They pass the same filter as the
// response headers (hop-by-hop dropped, injected values masked) and their gRPC status is noted
// on the row before it is recorded.
import type { RequestState } from './request-state.js'
import type { Scrubber } from './scrub.js'
import { HOP_BY_HOP } from './upstream.js'
import { noteGrpcStatus } from './grpc.js'

/** Hands the upstream's trailers (if any) to the client's response, to be sent with its end. */
export function relayTrailers(st: RequestState, scrubber: Scrubber | undefined): void {
  const from = st.response?.trailers
  if (!from) return
  let trailers: Record<string, string | string[]> = {}
  let any = false
  for (const k in from) {
    if (HOP_BY_HOP.has(k) || k.charCodeAt(0) === 58) continue
    trailers[k] = from[k]!
    any = true
  }
  if (!any) return
  if (scrubber) trailers = scrubber.headers(trailers)
  noteGrpcStatus(st.ctx, trailers)
  st.res.addTrailers(trailers)
}

/** gRPC status fields that a trailers-only answer puts in its headers. */
const GRPC_STATUS_FIELDS = ['grpc-status', 'grpc-message', 'grpc-status-details-bin']

/**
 * A trailers-only gRPC answer (one HEADERS frame that ends the stream, its status in it) cannot be
 * relayed as such through a response written head first: its status fields move to the trailers,
 * sent with the end of the stream, which gRPC reads the same (a response of zero messages).
 */
export function trailersOnly(headers: Record<string, string | string[]>, trailers: Record<string, string | string[]>): void {
  if (headers['grpc-status'] === undefined) return
  for (const k of GRPC_STATUS_FIELDS) {
    if (headers[k] === undefined) continue
    trailers[k] ??= headers[k]!
    delete headers[k]
  }
}
