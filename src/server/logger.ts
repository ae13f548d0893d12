// The server's structured JSON logger (pino). Credentials never reach a log line: headers and
// fields that can hold one are redacted by path, and the request URL is logged without the
// `api_key` query parameter browsers use for EventSource. On a terminal the lines are pretty
// (pino-pretty, one line each, in this process: no transport worker); piped, they are JSON.
import { createRequire } from 'node:module'
import type PinoPretty from 'pino-pretty'
import { pino, stdSerializers, stdTimeFunctions, type DestinationStream, type Logger, type LoggerOptions } from 'pino'

export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-corral-signature"]',
  'authorization',
  'api_key',
  'token',
  'value',
  'secret',
  'secret_hash',
  '*.authorization',
  '*.api_key',
  '*.token',
  '*.value',
  '*.secret',
  '*.secret_hash',
]

const SECRET_QUERY_PARAMS = /([?&](?:api_key|token|access_token)=)[^&#]*/gi

export function redactUrl(url: string): string {
  return url.replace(SECRET_QUERY_PARAMS, '$1[Redacted]')
}

interface RequestLike {
  method?: string
  url?: string
  ip?: string
  headers?: Record<string, unknown>
}

export type LogFormat = 'json' | 'pretty'

export interface LoggerOpts {
  level?: string
  destination?: NodeJS.WritableStream
  /** Default: pretty when stdout is a terminal and CORRAL_LOG_FORMAT is not `json`; JSON otherwise. */
  format?: LogFormat
}

export function createLogger(opts: LoggerOpts = {}): Logger {
  const options: LoggerOptions = {
    level: opts.level ?? process.env.CORRAL_LOG_LEVEL ?? 'info',
    base: undefined,
    timestamp: stdTimeFunctions.isoTime,
    redact: { paths: REDACT_PATHS, censor: '[Redacted]' },
    serializers: {
      req: (req: RequestLike) => ({ method: req.method, url: req.url ? redactUrl(req.url) : undefined, remote_address: req.ip }),
      res: (res: { statusCode?: number }) => ({ status: res.statusCode }),
      err: stdSerializers.err,
    },
  }
  const format = opts.format ?? (opts.destination ? 'json' : defaultFormat())
  if (format === 'pretty') {
    // Loaded only for people: a piped process (production) never formats a line for a terminal.
    const pretty = createRequire(import.meta.url)('pino-pretty') as typeof PinoPretty
    return pino({ ...options, timestamp: stdTimeFunctions.epochTime, hooks: { logMethod: oneLinePerRequest() } }, pretty({
      colorize: !process.env.NO_COLOR && !opts.destination,
      translateTime: 'SYS:HH:MM:ss.l',
      ignore: 'pid,hostname',
      singleLine: true,
      // Synchronous, so log lines and the command's own stdout lines keep their order.
      sync: true,
      ...(opts.destination ? { destination: opts.destination } : {}),
    }))
  }
  return opts.destination ? pino(options, opts.destination as DestinationStream) : pino(options)
}

/** Requests in flight whose first line was held back, at most (a request that never completes is forgotten first). */
const HELD_REQUESTS = 10_000

/**
 * For people, one line per request: fastify's "incoming request" is held back and its method and
 * URL go into "request completed" (`GET /v1/… 200 4 ms`). JSON logs keep both lines.
 */
function oneLinePerRequest(): (this: Logger, args: unknown[], method: (...a: unknown[]) => void) => void {
  const held = new Map<string, string>()
  return function (this: Logger, args, method) {
    const [obj, msg] = args as [Record<string, any> | undefined, unknown]
    const id = String(this.bindings().request_id ?? '')
    if (msg === 'incoming request' && obj?.req && id) {
      if (held.size >= HELD_REQUESTS) held.delete(held.keys().next().value!)
      held.set(id, `${obj.req.method} ${redactUrl(String(obj.req.url ?? ''))}`)
      return
    }
    if (msg === 'request completed' && id && held.has(id)) {
      const line = held.get(id)!
      held.delete(id)
      method.apply(this, [{}, `${line} ${obj?.res?.statusCode ?? ''} ${Math.round(Number(obj?.responseTime ?? 0))} ms`])
      return
    }
    method.apply(this, args)
  }
}

function defaultFormat(): LogFormat {
  const asked = process.env.CORRAL_LOG_FORMAT
  if (asked === 'json' || asked === 'pretty') return asked
  return process.stdout.isTTY ? 'pretty' : 'json'
}
