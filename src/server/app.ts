// buildApp(deps): the whole HTTP surface as one Fastify instance, with no sockets of its own —
// `serve` listens and drains; tests drive it with inject(). One root error handler renders the
// spec's envelope for everything (validation, bad JSON, CorralError, faults) and one not-found
// handler answers unknown routes, so no framework default page ever leaks.
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import Fastify, { LogController, type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import { AuditUnavailableError, collectAuditEmits } from '../audit/index.js'
import { CorralError, apiError, type ErrorEnvelope } from '../contract/index.js'
import { isStoreUnavailable } from '../store/index.js'
import { ApiKeyCache, KEY_REVOKED_CHANNEL } from './auth/key-cache.js'
import type { AuthState } from './auth/authenticate.js'
import { createAuthHook } from './auth/hook.js'
import { doorOptions, installDoor } from './door.js'
import { edgeOptions, installEdge, sendError as send } from './edge.js'
import { DEFAULT_API_LIMITS } from './limits.js'
import { TokenBucketLimiter } from './rate-limit.js'
import { REQUEST_ID_HEADER, mintRequestId } from './request-id.js'
import { consoleRoutes } from './console.js'
import { openApiRoute, registerOpenApi } from './openapi.js'
import { lazySchemaController } from './lazy-schemas.js'
import { healthRoutes } from './routes/health.js'
import { V1_ROUTES } from './routes/index.js'
import { taskLimiter } from './task-input.js'
import type { ServerDeps } from './types.js'
import { fieldsOf, type ValidationIssue } from './validation.js'

export async function buildApp(deps: ServerDeps): Promise<FastifyInstance> {
  const limits = deps.config.limits ?? DEFAULT_API_LIMITS
  const schemas = lazySchemaController()
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    genReqId: mintRequestId,
    logController: new LogController({ requestIdLogLabel: 'request_id' }),
    bodyLimit: deps.config.bodyLimit ?? 1024 * 1024,
    // Wrong types are validation errors, not silently coerced; unknown body fields are rejected by
    // `additionalProperties: false` in the schemas rather than dropped.
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: true } },
    // Each route's validators and serializers are compiled at its first request (lazy-schemas.ts).
    schemaController: schemas.option,
    // fastify's own 503-on-closing body is not our envelope; installDrain's hook answers instead.
    return503OnClosing: false,
    // Header, request and keep-alive timeouts (src/server/door.ts): a slow-drip or idle client
    // holds a socket for a bounded time only.
    ...doorOptions(limits),
    ...edgeOptions(),
  })

  schemas.attach(app)
  app.decorateRequest('principal', null)
  app.decorateRequest('grants', null as never)
  installDoor(app, limits)
  installDrain(app)
  installEdge(app)
  installDurableAnswers(app)
  app.setErrorHandler(errorHandler)

  const state: AuthState = { cache: new ApiKeyCache({ ttlMs: deps.config.keyCacheTtlMs }), lastTouched: new Map() }
  // A key revoked on another replica is evicted here too (Postgres NOTIFY; in-process on SQLite).
  const unlisten = await deps.store.listen(KEY_REVOKED_CHANNEL, (keyId: string) => state.cache.heard(keyId))
  app.addHook('onClose', async () => unlisten())
  app.decorate('keyCache', state.cache)

  const limiter = deps.config.rateLimit ? new TokenBucketLimiter(deps.config.rateLimit) : undefined

  // Before any route: @fastify/swagger collects every route's schema as it is added.
  await registerOpenApi(app)
  await app.register(async (root) => healthRoutes(root, deps))
  // The web console's files at `/` (src/server/console.ts); outside /v1, no auth: the page signs in.
  await app.register(async (root) => consoleRoutes(root))
  app.register(
    async (v1) => {
      v1.addHook('onRequest', createAuthHook(deps, state, limiter))
      // Fail at startup, not at request time, when a /v1 route forgets to say who may call it.
      v1.addHook('onRoute', (route) => {
        const config = (route.config ?? {}) as { permission?: unknown; auth?: unknown }
        if (config.auth !== false && config.permission === undefined) {
          throw new Error(`route ${String(route.method)} ${route.url} declares neither config.permission nor config.auth: false`)
        }
      })
      const shared = { taskLimiter: taskLimiter(deps.config) }
      for (const routes of V1_ROUTES) await v1.register(async (scope) => routes(scope, deps, shared))
      await v1.register(async (scope) => openApiRoute(scope, app))
    },
    { prefix: '/v1' },
  )
  try {
    await app.ready()
  } catch (err) {
    await app.close().catch(() => {})
    throw err
  }
  return app
}

/**
 * While draining (SIGTERM), requests arriving on kept-alive connections are refused so the load
 * balancer retries elsewhere; requests already in flight finish.
 */
function installDrain(app: FastifyInstance): void {
  let closing = false
  const endIdle = trackConnections(app, () => closing)
  app.addHook('preClose', async () => {
    closing = true
    endIdle()
  })
  app.addHook('onRequest', async (request, reply) => {
    reply.header(REQUEST_ID_HEADER, request.id)
    if (closing) {
      reply.header('connection', 'close')
      throw apiError('service_unavailable', 'the server is shutting down; retry')
    }
  })

  // Responses finishing during the drain close their keep-alive connection, so close() does not
  // wait for the client's idle timeout.
  app.addHook('onSend', async (_request, reply, payload) => {
    if (closing) reply.header('connection', 'close')
    return payload
  })
}

/**
 * Connections end with the drain: at close() a connection with no request in flight is ended, and
 * any other once its last response is done. Node's own close() ends only the connections its
 * parser bookkeeping counts idle; test/security/api-fuzz's after-all hook found kept-alive
 * connections with no request in flight that it did not count (their last answer a console file,
 * after hostile requests answered before their bodies were read), and close() then waited out the
 * keep-alive timeout (72 s) — past the hook's 60 s, and past serve's 20 s drain. Returns what ends
 * the idle ones.
 */
function trackConnections(app: FastifyInstance, closing: () => boolean): () => void {
  const inFlight = new Map<Socket, number>()
  app.server.on('connection', (socket: Socket) => {
    inFlight.set(socket, 0)
    socket.once('close', () => inFlight.delete(socket))
  })
  app.server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket
    inFlight.set(socket, (inFlight.get(socket) ?? 0) + 1)
    res.once('close', () => {
      const left = Math.max(0, (inFlight.get(socket) ?? 1) - 1)
      if (inFlight.has(socket)) inFlight.set(socket, left)
      if (closing() && left === 0) socket.end()
    })
  })
  return () => {
    for (const [socket, n] of inFlight) if (n === 0) socket.end()
  }
}

/**
 * Durable before the answer: every audit event a request emitted (awaited by its route or not)
 * is durable before the response leaves; if one could not be, a success becomes the 503 the
 * audit log answered (docs/reliability.md "Durability").
 */
function installDurableAnswers(app: FastifyInstance): void {
  const emitted = new WeakMap<FastifyRequest, Set<Promise<unknown>>>()
  app.addHook('onRequest', (request, _reply, done) => {
    const pending = new Set<Promise<unknown>>()
    emitted.set(request, pending)
    collectAuditEmits(pending, done)
  })
  app.addHook('onSend', async (request, reply, payload) => {
    const pending = emitted.get(request)
    if (!pending || pending.size === 0) return payload
    const results = await Promise.allSettled(pending)
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected')
    if (!failed || reply.statusCode >= 400) return payload
    const err = failed.reason instanceof CorralError ? failed.reason : new AuditUnavailableError('queue_full', 1, 'the audit log could not record this change; retry')
    if (err instanceof AuditUnavailableError) reply.header('retry-after', String(err.retryAfterSeconds))
    reply.code(err.status).type('application/json; charset=utf-8')
    const body: ErrorEnvelope = { error: { code: err.code, message: err.message, request_id: String(request.id), ...(err.details ? { details: err.details } : {}) } }
    return JSON.stringify(body)
  })
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The API-key verification cache (routes evict on revoke). */
    keyCache: ApiKeyCache
  }
}

function errorHandler(this: FastifyInstance, err: FastifyError & { validationContext?: string }, request: FastifyRequest, reply: FastifyReply): void {
  // The database is down, full or locked: the client retries; serve recovers by itself when it is back.
  if (isStoreUnavailable(err)) {
    request.log.warn({ err: { message: err.message, code: err.code } }, 'store unavailable')
    return send(reply, request, 503, 'service_unavailable', 'the database is unavailable; retry after Retry-After')
  }
  if (err instanceof CorralError) {
    if (err instanceof AuditUnavailableError) reply.header('retry-after', String(err.retryAfterSeconds))
    else if (err.status >= 500) request.log.error({ err }, 'request failed')
    return send(reply, request, err.status, err.code, err.message, err.details)
  }
  if (err.validation) {
    const fields = fieldsOf(err.validation as ValidationIssue[], err.validationContext)
    return send(reply, request, 400, 'validation_error', `invalid ${err.validationContext ?? 'request'}: ${Object.entries(fields).map(([k, v]) => `${k} ${v}`).join('; ')}`, { fields })
  }
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return send(reply, request, 400, 'validation_error', 'the request body is not valid JSON', { fields: { body: err.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' ? 'is empty' : 'is not valid JSON' } })
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      // The rest of the body is not read: the connection closes after the answer (a lingering
      // close, src/server/door.ts, so the client still sending can read it).
      reply.header('connection', 'close')
      return send(reply, request, 413, 'payload_too_large', 'the request body is too large')
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return send(reply, request, 400, 'validation_error', 'the request body does not match its Content-Length', { fields: { body: 'does not match Content-Length' } })
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return send(reply, request, 415, 'unsupported_media_type', `unsupported content type ${request.headers['content-type'] ?? '(none)'}`)
  }
  // A SyntaxError from a custom JSON parser, or any other client error fastify flags with a 4xx.
  if (err instanceof SyntaxError) return send(reply, request, 400, 'validation_error', 'the request body is not valid JSON', { fields: { body: 'is not valid JSON' } })
  if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
    return send(reply, request, err.statusCode, err.statusCode === 404 ? 'not_found' : 'validation_error', err.message)
  }
  request.log.error({ err }, 'unhandled error')
  send(reply, request, 500, 'internal_error', 'internal error; quote the request id when reporting it')
}

