// The front door: everything between the socket and a route. One place, so a route added later is
// covered without doing anything:
//   - every error leaves in the spec's envelope, those fastify and Node's HTTP parser raise before
//     a route runs included (bad URL or percent-encoding, 431 header overflow, malformed HTTP,
//     request timeout, body too large, unsupported media type, bad JSON);
//   - every string that enters — JSON body, query string, path parameter — passes the input check
//     (src/contract/input-limits.ts: NUL, lone surrogates, nesting depth) before validation sees it;
//   - a known path with another method is 405 `method_not_allowed` with `Allow`, not a 404.
import type { Socket } from 'node:net'
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify'
import { assertCleanInput, type ErrorEnvelope } from '../contract/index.js'
import { REQUEST_ID_HEADER, mintRequestId } from './request-id.js'

/** fastify's router limit on one path parameter (its `maxParamLength` default, kept explicit). */
export const MAX_PARAM_LENGTH = 100
/** Retry-After on a 503 that does not set its own. */
export const RETRY_AFTER_SECONDS = 2
/** Longest path echoed back in a not-found message (a 100 KiB URL is not repeated to its sender). */
const ECHO_CHARS = 200

export function sendError(reply: FastifyReply, request: FastifyRequest, status: number, code: string, message: string, details?: Record<string, unknown>): void {
  const body: ErrorEnvelope = { error: { code, message, request_id: String(request.id), ...(details ? { details } : {}) } }
  if (reply.sent || reply.raw.headersSent) return
  // Every 503 is worth retrying (the database is back, the queue drained, another replica): say when.
  if (status === 503 && !reply.hasHeader('retry-after')) reply.header('retry-after', String(RETRY_AFTER_SECONDS))
  void reply.code(status).header(REQUEST_ID_HEADER, String(request.id)).type('application/json; charset=utf-8').send(body)
}

/** Fastify constructor options of the front door. */
export function edgeOptions(): Pick<FastifyServerOptions, 'frameworkErrors' | 'clientErrorHandler' | 'routerOptions'> {
  return {
    // Under routerOptions: the top-level option is deprecated (FSTDEP022, printed at every start).
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // Raised while routing (no hooks ran): a malformed URL or percent-encoding, a path parameter
    // over maxParamLength.
    frameworkErrors(err, request, reply) {
      if (err.code === 'FST_ERR_BAD_URL') {
        return sendError(reply, request, 400, 'validation_error', 'the request URL is malformed (bad percent-encoding?)', { fields: { url: 'is not a valid URL' } })
      }
      if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') {
        return sendError(reply, request, 400, 'validation_error', `a path parameter is longer than ${MAX_PARAM_LENGTH} characters`, { fields: { path: `a parameter is over ${MAX_PARAM_LENGTH} characters` } })
      }
      const status = (err as { statusCode?: number }).statusCode
      if (status && status >= 400 && status < 500) return sendError(reply, request, 400, 'validation_error', 'the request cannot be routed', { fields: { url: 'cannot be routed' } })
      request.log.error({ err }, 'framework error')
      sendError(reply, request, 500, 'internal_error', 'internal error; quote the request id when reporting it')
    },
    // Node's HTTP parser refused the bytes: there is no request object, only the socket.
    clientErrorHandler: answerClientError,
  }
}

export function answerClientError(err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return
  const [status, reason, code, message, details] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'Request Header Fields Too Large', 'headers_too_large', 'the request line and headers exceed the 16 KiB limit', undefined]
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout', 'request_timeout', 'the request was not received in time', undefined]
        : [400, 'Bad Request', 'validation_error', 'the request is not valid HTTP/1.1', { fields: { request: 'is not valid HTTP/1.1' } }]
  const id = mintRequestId()
  const body = JSON.stringify({ error: { code, message, request_id: id, ...(details ? { details } : {}) } })
  // A response already under way on this socket (pipelining) cannot be followed by ours.
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage
  if (socket.writable && !inFlight?.headersSent) {
    socket.end(
      `HTTP/1.1 ${status} ${reason}\r\n${REQUEST_ID_HEADER}: ${id}\r\ncontent-type: application/json; charset=utf-8\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    )
  }
  // Whatever the client does next, this connection is over (end() alone waits for its FIN).
  socket.destroySoon()
}

/** Parsers, the input-check hook and the not-found/method-not-allowed handler. Call before routes are registered. */
export function installEdge(app: FastifyInstance): void {
  // Many clients send `content-type: application/json` on every request, bodiless DELETEs
  // included: an empty body is "no body" (schemas still require one where a route needs it).
  // Non-empty bodies go through fastify's own parser (prototype-poisoning protection). Only JSON
  // is parsed here; multipart is read by the routes that take it.
  const parseJson = app.getDefaultJsonParser('error', 'error')
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '' || (typeof body === 'string' && body.trim() === '')) return done(null, undefined)
    parseJson(request, body as string, done)
  })

  // The input check, for every route of every scope — whatever parser a scope installed (the
  // webhook route keeps its raw body with its own) — after parsing and before schema validation.
  // Query strings and path parameters arrive percent-decoded: `%00` is a NUL like any other.
  app.addHook('preValidation', async (request) => {
    assertCleanInput(request.params, 'params')
    assertCleanInput(request.query, 'query')
    assertCleanInput(request.body, 'body')
  })

  const routes: Array<RouteEntry & { pattern: RegExp }> = []
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method]
    const url = route.url ?? route.path
    for (const method of methods) routes.push({ method: String(method).toUpperCase(), url, pattern: patternOf(url) })
  })
  // Every route the app serves, for the 405 check and for tools that walk the API (the fuzz suite).
  app.decorate('routeTable', (): readonly RouteEntry[] => routes.map(({ method, url }) => ({ method, url })))
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0]!
    const shown = path.length > ECHO_CHARS ? `${path.slice(0, ECHO_CHARS)}…` : path
    const allowed = [...new Set(routes.filter((r) => r.pattern.test(path)).map((r) => r.method))].sort()
    if (allowed.length > 0 && !allowed.includes(request.method)) {
      reply.header('allow', allowed.join(', '))
      return sendError(reply, request, 405, 'method_not_allowed', `${request.method} is not allowed on ${shown}; allowed: ${allowed.join(', ')}`, { allowed })
    }
    sendError(reply, request, 404, 'not_found', `no route ${request.method} ${shown}`)
  })
}

export interface RouteEntry {
  method: string
  url: string
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Every registered route (method and fastify path pattern), in registration order. */
    routeTable(): readonly RouteEntry[]
  }
}

/** A fastify route path (`/v1/api-keys/:id`, `/files/*`) as a regular expression over request paths. */
function patternOf(url: string): RegExp {
  const parts = url.split('/').map((seg) => (seg === '*' ? '.*' : seg.includes(':') ? '[^/]+' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
  return new RegExp(`^${parts.join('/')}$`)
}
