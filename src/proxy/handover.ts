// The hand-over of an intercepted tunnel after its TLS handshake: ALPN decides which server reads
// it (HTTP/1.1: the front's inner server; h2: h2/front.ts). Until then the front watches it.
import type { TLSSocket } from 'node:tls'

/**
 * Until the handshake is done, its failures go to `onEarlyError` (the inner server's client
 * errors: one row); once it is, `dispatch` gets the socket with its ALPN settled.
 */
export function handOver(tls: TLSSocket, onEarlyError: (err: NodeJS.ErrnoException) => void, dispatch: (h2: boolean) => void): void {
  tls.once('error', onEarlyError)
  // Flowing from the start, as under the HTTP server: no application byte can arrive before
  // 'secure' hands the socket on.
  tls.resume()
  // The socket came from the HTTP server, which allows half-open sockets: an EOF before the
  // hand-over ends the tunnel here (after it, the server that took it does).
  let handedOver = false
  tls.once('end', () => {
    if (!handedOver) tls.destroy()
  })
  tls.once('secure', () => {
    handedOver = true
    tls.off('error', onEarlyError)
    dispatch(tls.alpnProtocol === 'h2')
  })
}
