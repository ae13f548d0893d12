// Where the audit log is shipped, read once from the environment by serve's configuration
// (docs/audit.md "OTLP streaming"): CORRAL_AUDIT_OTLP_* for an OpenTelemetry collector's OTLP/HTTP
// logs endpoint, CORRAL_AUDIT_OCSF_* for an HTTP endpoint that takes OCSF events as JSON lines.
// The names follow the OpenTelemetry exporter variables (an endpoint, `k=v,…` headers, the protocol
// `http/protobuf` or `http/json`) under corral's prefix: the audit log is data an operator routes on
// purpose, not serve's own telemetry, so a global OTEL_* setting does not start shipping it.
import type { OtlpEncoding } from '../export/index.js'

export type SinkKind = 'otlp' | 'ocsf'

export interface AuditSinkConfig {
  /** The cursor's name in the store: a new name starts again from the first row. */
  name: string
  kind: SinkKind
  url: string
  headers: Record<string, string>
  /** OTLP only. */
  encoding: OtlpEncoding
  /** Rows per request. */
  batchSize: number
  /** One request's deadline. */
  timeoutMs: number
}

/** A setting that cannot be used; serve stops with its message. */
export class AuditSinkConfigError extends Error {
  override readonly name = 'AuditSinkConfigError'
}

const DEFAULT_BATCH = 500
const MAX_BATCH = 10_000
const DEFAULT_TIMEOUT_MS = 10_000

/** `k=v,k2=v2` with percent-encoded values, as OTEL_EXPORTER_OTLP_HEADERS. */
export function parseHeaders(text: string | undefined, variable: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const part of (text ?? '').split(',')) {
    if (!part.trim()) continue
    const eq = part.indexOf('=')
    const key = eq > 0 ? part.slice(0, eq).trim() : ''
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(key)) throw new AuditSinkConfigError(`${variable}: "${part.trim()}" is not name=value`)
    try {
      out[key] = decodeURIComponent(part.slice(eq + 1).trim())
    } catch {
      throw new AuditSinkConfigError(`${variable}: the value of ${key} is not percent-encoded text`)
    }
  }
  return out
}

function endpoint(text: string, variable: string, defaultPath: string | undefined): string {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    throw new AuditSinkConfigError(`${variable}: "${text}" is not a URL`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new AuditSinkConfigError(`${variable}: only http and https URLs are supported`)
  if (defaultPath && (url.pathname === '' || url.pathname === '/')) url.pathname = defaultPath
  return url.toString()
}

function positive(text: string | undefined, variable: string, fallback: number, max: number): number {
  if (text === undefined || text === '') return fallback
  const n = Number(text)
  if (!Number.isInteger(n) || n < 1 || n > max) throw new AuditSinkConfigError(`${variable}: expected an integer from 1 to ${max}, got "${text}"`)
  return n
}

/** The configured sinks (none, one or both). */
export function auditSinksFromEnv(env: Record<string, string | undefined>): AuditSinkConfig[] {
  const sinks: AuditSinkConfig[] = []
  const batchSize = positive(env.CORRAL_AUDIT_SINK_BATCH, 'CORRAL_AUDIT_SINK_BATCH', DEFAULT_BATCH, MAX_BATCH)
  const timeoutMs = positive(env.CORRAL_AUDIT_SINK_TIMEOUT_MS, 'CORRAL_AUDIT_SINK_TIMEOUT_MS', DEFAULT_TIMEOUT_MS, 300_000)
  if (env.CORRAL_AUDIT_OTLP_ENDPOINT) {
    const protocol = env.CORRAL_AUDIT_OTLP_PROTOCOL ?? 'http/protobuf'
    if (protocol !== 'http/protobuf' && protocol !== 'http/json') {
      throw new AuditSinkConfigError(`CORRAL_AUDIT_OTLP_PROTOCOL: expected http/protobuf or http/json, got "${protocol}"`)
    }
    sinks.push({
      name: env.CORRAL_AUDIT_OTLP_CURSOR || 'otlp', kind: 'otlp',
      url: endpoint(env.CORRAL_AUDIT_OTLP_ENDPOINT, 'CORRAL_AUDIT_OTLP_ENDPOINT', '/v1/logs'),
      headers: parseHeaders(env.CORRAL_AUDIT_OTLP_HEADERS, 'CORRAL_AUDIT_OTLP_HEADERS'),
      encoding: protocol === 'http/json' ? 'json' : 'protobuf', batchSize, timeoutMs,
    })
  }
  if (env.CORRAL_AUDIT_OCSF_ENDPOINT) {
    sinks.push({
      name: env.CORRAL_AUDIT_OCSF_CURSOR || 'ocsf', kind: 'ocsf',
      url: endpoint(env.CORRAL_AUDIT_OCSF_ENDPOINT, 'CORRAL_AUDIT_OCSF_ENDPOINT', undefined),
      headers: parseHeaders(env.CORRAL_AUDIT_OCSF_HEADERS, 'CORRAL_AUDIT_OCSF_HEADERS'),
      encoding: 'json', batchSize, timeoutMs,
    })
  }
  if (sinks.length === 2 && sinks[0]!.name === sinks[1]!.name) throw new AuditSinkConfigError('CORRAL_AUDIT_OTLP_CURSOR and CORRAL_AUDIT_OCSF_CURSOR name the same cursor')
  return sinks
}
