// The resource limits that protect the proxy front (docs/reliability.md, "Limits"). Every limit
// has a default, an environment variable, and a documented answer when it is hit: a
// `limit_exceeded` deny with `detail.limit` once the request is attributed, or a bare 400/408/431
// (with a platform-scope row) for transport violations before any token is read.

export interface ProxyLimits {
  /** Open client connections to the proxy port (tunnels included); beyond it new sockets are closed at accept. */
  maxConnections: number
  /** Open CONNECT tunnels per workspace (keyed by the token's workspace). */
  maxConnectionsPerWorkspace: number
  /** Requests of one workspace inside the phases or relaying at once. */
  maxInFlightPerWorkspace: number
  /** Request line plus headers, bytes (Node's maxHeaderSize). */
  maxHeaderBytes: number
  /** Request body relayed upstream, bytes (the inspected-body limit is separate: maxInspectBytes). */
  maxBodyBytes: number
  /** From a connection's first byte (or its previous response) to a complete request head. */
  headersTimeoutMs: number
  /** From a request's first byte to its last body byte. */
  requestTimeoutMs: number
  /** Idle keep-alive connection between two requests. */
  keepAliveTimeoutMs: number
  /** No byte in either direction while a request is open (stalled clients, stalled streams). */
  idleTimeoutMs: number
  /** From `CONNECT` to the first request inside the tunnel (TLS handshake included). */
  connectTimeoutMs: number
  /** Shutdown: how long in-flight requests may finish before their connections are cut. */
  drainMs: number
  /** Transport-violation rows (bytes that are not HTTP) written per second before they are only counted. */
  transportRowsPerSecond: number
  /** WebSocket: largest message (all its fragments together) relayed either way; beyond it the socket is closed 1009. */
  wsMaxMessageBytes: number
  /** WebSocket: largest text message a `websocket.message` counter copies to read whole; beyond it the socket is closed 1009. */
  wsMeterMessageBytes: number
  /** WebSocket: no message, ping or pong either way for this long closes the socket (1001). */
  wsIdleTimeoutMs: number
  /** WebSocket: open sockets per workspace. */
  maxWebSocketsPerWorkspace: number
  /** HTTP/2 streams open at once on one client connection (SETTINGS_MAX_CONCURRENT_STREAMS). */
  maxStreamsPerConnection: number
}

export const DEFAULT_LIMITS: Readonly<ProxyLimits> = Object.freeze({
  maxConnections: 4_096,
  maxConnectionsPerWorkspace: 256,
  maxInFlightPerWorkspace: 256,
  maxHeaderBytes: 32 * 1024,
  maxBodyBytes: 100 * 1024 * 1024,
  headersTimeoutMs: 30_000,
  requestTimeoutMs: 300_000,
  keepAliveTimeoutMs: 30_000,
  idleTimeoutMs: 300_000,
  connectTimeoutMs: 30_000,
  drainMs: 5_000,
  transportRowsPerSecond: 20,
  wsMaxMessageBytes: 16 * 1024 * 1024,
  wsMeterMessageBytes: 4 * 1024 * 1024,
  wsIdleTimeoutMs: 600_000,
  maxWebSocketsPerWorkspace: 64,
  maxStreamsPerConnection: 100,
})

/** Environment variable of each limit (`corral serve` and `corral proxy` read the same names). */
export const LIMIT_ENV: Readonly<Record<keyof ProxyLimits, string>> = Object.freeze({
  maxConnections: 'CORRAL_PROXY_MAX_CONNECTIONS',
  maxConnectionsPerWorkspace: 'CORRAL_PROXY_MAX_CONNECTIONS_PER_WORKSPACE',
  maxInFlightPerWorkspace: 'CORRAL_PROXY_MAX_INFLIGHT_PER_WORKSPACE',
  maxHeaderBytes: 'CORRAL_PROXY_MAX_HEADER_BYTES',
  maxBodyBytes: 'CORRAL_PROXY_MAX_BODY_BYTES',
  headersTimeoutMs: 'CORRAL_PROXY_HEADERS_TIMEOUT_MS',
  requestTimeoutMs: 'CORRAL_PROXY_REQUEST_TIMEOUT_MS',
  keepAliveTimeoutMs: 'CORRAL_PROXY_KEEPALIVE_TIMEOUT_MS',
  idleTimeoutMs: 'CORRAL_PROXY_IDLE_TIMEOUT_MS',
  connectTimeoutMs: 'CORRAL_PROXY_CONNECT_TIMEOUT_MS',
  drainMs: 'CORRAL_PROXY_DRAIN_MS',
  transportRowsPerSecond: 'CORRAL_PROXY_TRANSPORT_ROWS_PER_SECOND',
  wsMaxMessageBytes: 'CORRAL_PROXY_WS_MAX_MESSAGE_BYTES',
  wsMeterMessageBytes: 'CORRAL_PROXY_WS_METER_MESSAGE_BYTES',
  wsIdleTimeoutMs: 'CORRAL_PROXY_WS_IDLE_TIMEOUT_MS',
  maxWebSocketsPerWorkspace: 'CORRAL_PROXY_MAX_WEBSOCKETS_PER_WORKSPACE',
  maxStreamsPerConnection: 'CORRAL_PROXY_MAX_STREAMS_PER_CONNECTION',
})

/** A limit value that is not a positive integer: refused at start, naming the variable. */
export class InvalidLimitError extends Error {
  constructor(readonly variable: string, readonly value: string) {
    super(`${variable} must be a positive integer, got ${JSON.stringify(value.slice(0, 40))}`)
    this.name = 'InvalidLimitError'
  }
}

/** Defaults, overridden by the environment, then by explicit values (tests). */
export function resolveLimits(env: Record<string, string | undefined> = {}, overrides: Partial<ProxyLimits> = {}): ProxyLimits {
  const out = { ...DEFAULT_LIMITS }
  for (const key of Object.keys(LIMIT_ENV) as Array<keyof ProxyLimits>) {
    const raw = env[LIMIT_ENV[key]]
    if (raw === undefined || raw === '') continue
    const n = Number(raw)
    if (!/^\d+$/.test(raw.trim()) || !Number.isSafeInteger(n) || n < 1) throw new InvalidLimitError(LIMIT_ENV[key], raw)
    out[key] = n
  }
  for (const [k, v] of Object.entries(overrides)) if (v !== undefined) (out as Record<string, number>)[k] = v
  return Object.freeze(out)
}
