// The one onRequest hook of the /v1 scope: authenticate, rate-limit per credential, check the
// route's declared permission, refuse writes in an inactive billing posture. Exemptions are route
// config (`auth: false`, `postureExempt`, `queryCredential`), never URL matching.
import type { FastifyReply, FastifyRequest } from 'fastify'
import { apiError } from '../../contract/index.js'
import { evaluate } from '../permissions.js'
import { enforceRateLimit, type TokenBucketLimiter } from '../rate-limit.js'
import type { ServerDeps } from '../types.js'
import { authenticate, type AuthState } from './authenticate.js'

const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS'])

export function bearerToken(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization
  if (typeof header === 'string') {
    const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header)
    return m ? m[1] : undefined
  }
  if (request.routeOptions.config.queryCredential) {
    const q = (request.query as Record<string, unknown> | undefined)?.api_key
    if (typeof q === 'string' && q !== '') return q
  }
  return undefined
}

export function createAuthHook(deps: ServerDeps, state: AuthState, limiter: TokenBucketLimiter | undefined) {
  return async function authHook(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const config = request.routeOptions.config
    if (config.auth === false) return
    // Fail closed: a route that forgot to declare its permission is unusable, not open.
    if (config.permission === undefined) throw apiError('internal_error', 'route declares no permission')

    const token = bearerToken(request)
    if (!token) throw apiError('unauthenticated', 'missing credential: send Authorization: Bearer <token>')
    const principal = await authenticate(deps, state, token)
    request.principal = principal
    request.log = request.log.child({ org_id: principal.org.id, ...(principal.keyId ? { key_id: principal.keyId } : { user_id: principal.userId }) })

    if (limiter) enforceRateLimit(limiter, principal.keyId ?? `usr:${principal.userId}:${principal.org.id}`, reply)

    const grants = evaluate(principal.permissions, config.permission)
    if (!grants) {
      const needed = config.permission?.map((alts) => alts.join(' or ')).join(', and ')
      throw apiError('permission_denied', `this credential lacks the required permission (${needed})`, { required: config.permission })
    }
    request.grants = grants

    if (!READ_METHODS.has(request.method) && !config.postureExempt && principal.org.posture !== 'active') {
      throw apiError('tenant_inactive', `the organisation is ${principal.org.posture}; write operations are refused`, { posture: principal.org.posture })
    }
  }
}
