// The server's structured JSON logger (pino). Credentials never reach a log line: headers and
// fields that can hold one are redacted by path, and the request URL is logged without the
// `api_key` query parameter browsers use for EventSource. On a terminal the lines are pretty
// (pino-pretty, one line each, in this process: no transport worker); piped, they are JSON.
import pretty from 'pino-pretty'
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
  if (opts.destination) return pino(options, opts.destination as DestinationStream)
  if ((opts.format ?? defaultFormat()) === 'pretty') {
    return pino({ ...options, timestamp: stdTimeFunctions.epochTime }, pretty({
      colorize: !process.env.NO_COLOR,
      translateTime: 'SYS:HH:MM:ss.l',
      ignore: 'pid,hostname',
      singleLine: true,
      // Synchronous, so log lines and the command's own stdout lines keep their order.
      sync: true,
    }))
  }
  return pino(options)
}

function defaultFormat(): LogFormat {
  const asked = process.env.CORRAL_LOG_FORMAT
  if (asked === 'json' || asked === 'pretty') return asked
  return process.stdout.isTTY ? 'pretty' : 'json'
}
