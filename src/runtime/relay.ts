import type { Socket } from 'node:net'

/**
 * Joins two sockets both ways. `pipe` gives back-pressure (a slow reader pauses the writer) and
 * forwards each direction's end as a half-close, so protocols that rely on FIN still work. Both
 * sockets must be created with `allowHalfOpen: true`.
 *
 * Shutdown: a socket that closes cleanly has read its peer's FIN and flushed everything it was
 * given, so the other socket is already ending and will close itself once its own writes drain
 * (Duplex autoDestroy); destroying it then would cut those writes. Any abrupt close or error, on
 * the other hand, destroys both at once so no half-dead pair is left behind.
 */
export function relay(a: Socket, b: Socket): void {
  // Relayed bytes are already whole writes of the endpoints: Nagle would only hold a small one
  // back until the previous is acknowledged (a no-op on unix sockets).
  a.setNoDelay(true)
  b.setNoDelay(true)
  join(a, b)
  join(b, a)
  a.pipe(b)
  b.pipe(a)
}

function join(self: Socket, peer: Socket): void {
  self.on('error', () => peer.destroy())
  self.on('close', (hadError: boolean) => {
    const clean = !hadError && self.readableEnded && self.writableFinished
    if (!clean) peer.destroy()
  })
}
