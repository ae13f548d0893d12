// The limits of the API port's front door (docs/api.md "Connections"): how long a connection may
// stay silent, drip its headers, sit idle between requests, and how many one address may hold.
// Each has a default and an environment variable, like the proxy port's (src/proxy/limits.ts).

export interface ApiLimits {
  /** Open connections to the API port; beyond it new sockets are closed at accept. */
  maxConnections: number
  /** Open connections from one client address; beyond it new sockets from it are closed at accept. */
  maxConnectionsPerIp: number
  /** From a connection's first byte (or its previous response) to a complete request head; also bounds a connection that sends nothing. */
  headersTimeoutMs: number
  /** From a request's first byte to its last body byte (pack uploads included). */
  requestTimeoutMs: number
  /** Idle keep-alive connection between two requests. */
  keepAliveTimeoutMs: number
  /** After a body is refused (413) and answered: how long its remaining bytes are read and dropped before the connection is cut. */
  lingerMs: number
  /** …and how many such bytes at most. */
  lingerBytes: number
}

export const DEFAULT_API_LIMITS: Readonly<ApiLimits> = Object.freeze({
  maxConnections: 4_096,
  maxConnectionsPerIp: 512,
  headersTimeoutMs: 20_000,
  requestTimeoutMs: 300_000,
  keepAliveTimeoutMs: 30_000,
  lingerMs: 5_000,
  lingerBytes: 64 * 1024 * 1024,
})

export const API_LIMIT_ENV: Readonly<Record<keyof ApiLimits, string>> = Object.freeze({
  maxConnections: 'CORRAL_API_MAX_CONNECTIONS',
  maxConnectionsPerIp: 'CORRAL_API_MAX_CONNECTIONS_PER_IP',
  headersTimeoutMs: 'CORRAL_API_HEADERS_TIMEOUT_MS',
  requestTimeoutMs: 'CORRAL_API_REQUEST_TIMEOUT_MS',
  keepAliveTimeoutMs: 'CORRAL_API_KEEPALIVE_TIMEOUT_MS',
  lingerMs: 'CORRAL_API_LINGER_MS',
  lingerBytes: 'CORRAL_API_LINGER_BYTES',
})

/** Defaults, overridden by the environment (a value that is not a positive integer is refused, naming the variable), then by explicit values. */
export function resolveApiLimits(env: Record<string, string | undefined> = {}, overrides: Partial<ApiLimits> = {}): ApiLimits {
  const out = { ...DEFAULT_API_LIMITS }
  for (const key of Object.keys(API_LIMIT_ENV) as Array<keyof ApiLimits>) {
    const raw = env[API_LIMIT_ENV[key]]
    if (raw === undefined || raw === '') continue
    const n = Number(raw)
    if (!/^\d+$/.test(raw.trim()) || !Number.isSafeInteger(n) || n < 1) throw new Error(`${API_LIMIT_ENV[key]} must be a positive integer, got ${JSON.stringify(raw.slice(0, 40))}`)
    out[key] = n
  }
  for (const [k, v] of Object.entries(overrides)) if (v !== undefined) (out as Record<string, number>)[k] = v
  return Object.freeze(out)
}
