// The API port's connections (docs/api.md "Connections"): what a socket may hold before and
// between requests, and how a refused body is answered so the client can read the answer.
//   - Node's header check only sees a connection once its first byte arrived: a connection that
//     sends nothing is cut after the header timeout by a socket timer, cleared by its first request.
//   - Connections are counted in total (server.maxConnections) and per client address; over
//     either, a new socket is closed at accept.
//   - A response that closes its connection while its request's body is still arriving (413 over
//     the body limit, a refusal before an oversized upload, the drain) closes it lingering: the
//     write side ends after the answer (FIN) and the rest of the body is read and dropped until
//     the client closes its side or `lingerMs` passes. Closing with unread bytes would make the kernel reset
//     the connection, and the client, still sending, would see EPIPE instead of the envelope
//     (nginx's lingering_close is the same idea).
import type { Socket } from 'node:net'
import type { ServerOptions } from 'node:http'
import type { FastifyInstance } from 'fastify'
import type { ApiLimits } from './limits.js'

/** Fastify constructor options carrying the limits Node's HTTP server enforces itself. */
export function doorOptions(limits: ApiLimits): { requestTimeout: number; keepAliveTimeout: number; http: ServerOptions } {
  const headersTimeout = Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs)
  return {
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    // Node checks header and request deadlines on this interval; a quarter of the header timeout
    // (at most 1 s) keeps a 408 close to its deadline.
    http: { headersTimeout, connectionsCheckingInterval: Math.min(1_000, Math.max(50, Math.floor(headersTimeout / 4))) },
  }
}

export interface DoorCounters {
  /** Sockets closed at accept: over the total or the per-address limit. */
  refused: number
  /** Connections closed for sending nothing within the header timeout. */
  silent: number
}

export function installDoor(app: FastifyInstance, limits: ApiLimits): DoorCounters {
  const counters: DoorCounters = { refused: 0, silent: 0 }
  const server = app.server
  server.maxConnections = limits.maxConnections
  server.on('drop', () => counters.refused++)
  const perIp = new Map<string, number>()
  // A little longer than Node's own check, so a request that did start gets its 408 first.
  const silentMs = limits.headersTimeoutMs + 2 * Math.min(1_000, Math.max(50, Math.floor(limits.headersTimeoutMs / 4))) + 100
  function onSilent(this: Socket): void {
    counters.silent++
    this.destroy()
  }
  server.on('connection', (socket: Socket) => {
    const ip = socket.remoteAddress ?? ''
    const open = perIp.get(ip) ?? 0
    if (open >= limits.maxConnectionsPerIp) {
      counters.refused++
      socket.destroy()
      return
    }
    perIp.set(ip, open + 1)
    socket.once('close', () => {
      const left = (perIp.get(ip) ?? 1) - 1
      if (left > 0) perIp.set(ip, left)
      else perIp.delete(ip)
    })
    socket.setTimeout(silentMs, onSilent)
  })
  // From its first request on, Node's own timers bound the connection (headers, request,
  // keep-alive); a long-running answer (an SSE stream) is not cut by the silence timer.
  server.on('request', (req: { socket: Socket }) => {
    if (req.socket.listeners('timeout').includes(onSilent)) req.socket.setTimeout(0, onSilent)
  })

  app.addHook('onSend', async (request, reply, payload) => {
    if (!request.raw.complete && !request.raw.socket.destroyed && String(reply.getHeader('connection')).toLowerCase() === 'close') {
      lingerOnClose(request.raw.socket, limits.lingerMs)
    }
    return payload
  })
  return counters
}

/** Replaces the socket's close-after-response with a lingering close (see the file comment). */
function lingerOnClose(socket: Socket, lingerMs: number): void {
  const lingering = socket as Socket & { corralLinger?: true }
  if (lingering.corralLinger) return
  lingering.corralLinger = true
  socket.destroySoon = function lingeringDestroySoon(this: Socket) {
    const cut = setTimeout(() => socket.destroy(), lingerMs)
    cut.unref()
    socket.once('close', () => clearTimeout(cut))
    // The client's FIN (after its last body byte) ends the read side; Node then closes the socket.
    socket.end()
    socket.resume()
  }
}
