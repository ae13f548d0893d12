// Phase upstream: the (possibly transformed) request goes to its upstream through the pooled
// client (upstream.ts), its body streamed unless an earlier phase buffered it. The address check
// refusing the connection is a policy outcome (destination_private), not an upstream failure; any
// other failure to get an answer is thrown (the runner answers 502 or cuts the response).
import type { Readable } from 'node:stream'
import { destinationRefusal } from '../../net/index.js'
import { deny, type PhaseOutcome } from '../decision.js'
import type { ProxyCore, RequestState } from '../request-state.js'

/** Sets `st.response` to the upstream's answer (status and headers; its body not yet read). */
export async function upstream(core: ProxyCore, st: RequestState): Promise<PhaseOutcome> {
  const { ctx, entry, req } = st
  const out = st.transformed
  const path = out ? out.path : ctx.path
  const rawQuery = out ? out.rawQuery : st.policyRequest!.rawQuery
  const origin = (entry.origin ??= `${entry.scheme}://${entry.host.includes(':') ? `[${entry.host}]` : entry.host}:${entry.port}`)
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
  // The request's own header map (built for it by the runner or the transforms): Host goes in
  // here, so the client need not copy the map to add it.
  st.headers.host = hostHeader
  // Over HTTP/2 the one `te` value allowed end to end says the client reads trailers (gRPC).
  const h2 = req.httpVersionMajor === 2
  if (h2 && req.headers.te === 'trailers') st.headers.te = 'trailers'

  try {
    st.response = await core.upstream.send({
      origin,
      method: out?.method ?? ctx.method,
      path: rawQuery ? `${path}?${rawQuery}` : path,
      host: hostHeader,
      headers: st.headers,
      body,
      signal: st.abort,
      allowPrivate: ctx.match?.allowPrivate,
      h2,
    })
    return undefined
  } catch (err) {
    const refused = destinationRefusal(err)
    if (refused) return deny('destination_private', { address: refused.address, port: refused.port, ...(refused.own ? { listener: 'corral' } : {}) })
    throw err
  }
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
