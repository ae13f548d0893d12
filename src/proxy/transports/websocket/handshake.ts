// The two opening handshakes of a relayed WebSocket (RFC 6455 4): the proxy's own to the upstream
// (a client's, over one connection of its own through the address guard and certificate
// verification), then the agent's 101. Node's HTTP client reads the upstream's answer; what is
// checked is what `ws` checks of a server: the accept key, `Upgrade: websocket`, no extension
// (none is offered: the proxy reads every payload), a subprotocol only among those offered.
// Anything but a 101 comes back as a Refusal with its body (bounded) for the agent.
import { createHash, randomBytes } from 'node:crypto'
import { request as httpRequest, type IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'
import type { ProxyCore, RequestState } from '../../request-state.js'

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11'
/** Handshake headers the proxy writes itself on its upstream request. */
const HANDSHAKE = new Set(['sec-websocket-key', 'sec-websocket-version', 'sec-websocket-extensions', 'sec-websocket-protocol'])
/** An upstream's refusal body relayed to the agent, at most. */
const REFUSAL_BODY_MAX = 64 * 1024

/** An upstream that answered 101: its socket, the bytes it sent behind the 101, the subprotocol it chose. */
export interface UpstreamSocket {
  socket: Socket
  head: Buffer
  protocol: string
}

/** An upstream that answered anything but a 101. */
export interface Refusal {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: Buffer
}

/** A 101 that breaks the handshake's rules (`detail.upstream_error: websocket_handshake`). */
export class HandshakeError extends Error {}

export function acceptKey(key: string): string {
  return createHash('sha1').update(key + GUID).digest('base64')
}

/** Connects (address guard, TLS verification) and runs the upstream handshake. */
export async function openUpstream(core: ProxyCore, st: RequestState): Promise<UpstreamSocket | Refusal> {
  const { ctx, entry, req } = st
  const out = st.transformed
  const path = out ? out.path : ctx.path
  const rawQuery = out ? out.rawQuery : st.policyRequest!.rawQuery
  const socket = await core.upstream.connect(entry.host, entry.port, entry.scheme === 'https', ctx.match?.allowPrivate)
  const key = randomBytes(16).toString('base64')
  const offered = String(req.headers['sec-websocket-protocol'] ?? '').split(',').map((s) => s.trim()).filter(Boolean)
  const headers: Record<string, string | string[]> = {}
  for (const k in st.headers) if (!HANDSHAKE.has(k)) headers[k] = st.headers[k]!
  headers.host = entry.tunnel ? (req.headers.host ?? entry.host) : new URL(req.url!).host
  Object.assign(headers, { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-key': key, 'sec-websocket-version': '13' })
  if (offered.length) headers['sec-websocket-protocol'] = offered.join(', ')
  return new Promise((resolve, reject) => {
    let settled = false
    const done = (f: () => void): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      st.abort.off('abort', onAbort)
      f()
    }
    const fail = (err: Error): void => done(() => {
      socket.destroy()
      reject(err)
    })
    const r = httpRequest({ createConnection: () => socket, method: 'GET', path: rawQuery ? `${path}?${rawQuery}` : path, headers, setHost: false })
    const timer = setTimeout(() => fail(new Error('WebSocket handshake timed out')), core.limits.connectTimeoutMs)
    const onAbort = (): void => fail(new Error('the agent went away'))
    st.abort.once('abort', onAbort)
    r.on('error', fail)
    r.once('upgrade', (res: IncomingMessage, s: Socket, head: Buffer) => {
      // Nothing is read until the relay is wired: bytes behind the 101 wait in the socket.
      s.pause()
      const broken = handshakeFault(res, key, offered)
      if (broken) return fail(new HandshakeError(broken))
      done(() => resolve({ socket: s, head, protocol: String(res.headers['sec-websocket-protocol'] ?? '') }))
    })
    r.once('response', (res: IncomingMessage) => {
      const chunks: Buffer[] = []
      let size = 0
      res.on('data', (c: Buffer) => {
        if (size < REFUSAL_BODY_MAX) chunks.push(c.subarray(0, REFUSAL_BODY_MAX - size))
        size += c.length
        if (size >= REFUSAL_BODY_MAX) res.destroy()
      })
      const end = (): void => done(() => {
        socket.destroy()
        resolve({ status: res.statusCode ?? 502, headers: res.headers, body: Buffer.concat(chunks) })
      })
      res.once('end', end)
      res.once('close', end)
      res.once('error', end)
    })
    r.end()
  })
}

/** Why a 101 cannot be taken (undefined when it can). */
function handshakeFault(res: IncomingMessage, key: string, offered: readonly string[]): string | undefined {
  if (String(res.headers.upgrade ?? '').toLowerCase() !== 'websocket') return 'a 101 without Upgrade: websocket'
  if (res.headers['sec-websocket-accept'] !== acceptKey(key)) return 'a 101 with a wrong Sec-WebSocket-Accept'
  if (res.headers['sec-websocket-extensions'] !== undefined) return 'a 101 agreeing to an extension nobody offered (Sec-WebSocket-Extensions)'
  const chosen = res.headers['sec-websocket-protocol']
  if (chosen !== undefined && !offered.includes(chosen)) return 'a 101 naming a subprotocol nobody offered (Sec-WebSocket-Protocol)'
  return undefined
}

/** The agent's 101: the accept key of its own handshake, and the subprotocol the upstream chose (it was among the agent's). */
export function agentSwitch(req: IncomingMessage, protocol: string): string {
  const key = String(req.headers['sec-websocket-key']).trim()
  return `HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: ${acceptKey(key)}\r\n${protocol ? `sec-websocket-protocol: ${protocol}\r\n` : ''}\r\n`
}
