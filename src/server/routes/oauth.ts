// OAuth consent (spec "Credentials", docs/credentials.md "OAuth credentials"):
// `POST /v1/credentials/{id}/oauth/start` (auth:write, or auth:write:own for the caller's own
// personal credential) answers the provider's authorize URL and sets the state cookie pair;
// `GET /v1/oauth/callback` (no bearer: the state and the cookies authenticate it) finishes it.
// A client without the cookies (the CLI) names a loopback address at start and gets a binding
// secret instead: the callback sends its browser to that address, and the client finishes with
// `POST /v1/credentials/{id}/oauth/complete` (same permission, the binding and what its loopback
// received). The callback answers a small HTML page to a browser and the error envelope (or a
// JSON record) to anything else; a refusal changes no credential. The work is src/secrets/oauth/'s.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { parseCookie, stringifySetCookie } from 'cookie'
import { apiError, CorralError } from '../../contract/index.js'
import {
  CALLBACK_PATH, NONCE_COOKIE, OAuthCallbackError, STATE_COOKIE, type CallbackRefusal,
} from '../../secrets/index.js'
import { idParams } from '../schemas/common.js'
import { assertReaches } from '../credential-access.js'
import { oauthConsent } from '../oauth-consent.js'
import { asValidation } from '../org-material.js'
import type { ServerDeps } from '../types.js'

const START_PERMISSION = [['auth:write', 'auth:write:own']] as const
const STATE_REFUSALS = new Set<CallbackRefusal>(['state_missing', 'state_unknown', 'state_reused', 'state_expired', 'cookie_missing', 'cookie_mismatch', 'binding_mismatch'])
const CREDENTIAL_VIEW = { type: 'object', required: ['id', 'name', 'provider', 'kind', 'status'], properties: Object.fromEntries(['id', 'name', 'provider', 'kind', 'status'].map((k) => [k, { type: 'string' }])) }
/** The parameters of the provider's redirect (RFC 6749 §4.1.2, RFC 9207 iss); providers add their own, kept and passed on. */
const REDIRECT_QUERY = {
  type: 'object', maxProperties: 20, additionalProperties: { type: 'string', maxLength: 4096 },
  properties: Object.fromEntries(['code', 'state', 'error', 'error_description', 'error_uri', 'iss', 'scope'].map((k) => [k, { type: 'string', maxLength: 4096 }])),
}

export async function oauthRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  app.post<{ Params: { id: string }; Body: { loopback_uri?: string } | undefined }>(
    '/credentials/:id/oauth/start',
    {
      config: { permission: START_PERMISSION },
      // The body is optional: a browser (the console) starts with none.
      preValidation: async (request) => {
        request.body ??= {}
      },
      schema: {
        params: idParams,
        body: { type: 'object', additionalProperties: false, properties: { loopback_uri: { type: 'string', maxLength: 200 } } },
        response: {
          200: {
            type: 'object', required: ['auth_url'],
            properties: { auth_url: { type: 'string', format: 'uri' }, expires_at: { type: 'string' }, binding: { type: 'string' } },
          },
        },
      },
    },
    async (request, reply) => {
      const p = request.principal!
      const consent = oauthConsent(deps, 'oauth_unavailable')
      const why = consent.available()
      if (why) throw apiError('oauth_unavailable', why)
      const meta = await deps.store.proxy.credentials.get(p.org.id, request.params.id)
      if (!meta) throw apiError('not_found', 'credential not found')
      // `:own` reaches only the caller's own personal credential; the org's and other members' are refused.
      assertReaches(request, meta)
      const loopback = request.body?.loopback_uri
      const started = await consent.start({ orgId: p.org.id, userId: p.userId, creatorId: p.creatorId }, meta.id, loopback).catch(asValidation)
      reply.header('cache-control', 'no-store')
      // The client holds the binding itself; a cookie pair would bind nothing it can present.
      if (loopback !== undefined) return { auth_url: started.authUrl, expires_at: started.expiresAt.toISOString(), binding: started.nonce }
      const cookie = { httpOnly: true, sameSite: 'lax' as const, path: cookiePath(deps), secure: consent.redirectUri!.startsWith('https:'), maxAge: Math.floor((started.expiresAt.getTime() - Date.now()) / 1000) }
      reply.header('set-cookie', [stringifySetCookie({ name: STATE_COOKIE, value: started.state, ...cookie }), stringifySetCookie({ name: NONCE_COOKIE, value: started.nonce, ...cookie })])
      return { auth_url: started.authUrl, expires_at: started.expiresAt.toISOString() }
    },
  )

  app.get<{ Querystring: Record<string, string> }>(
    '/oauth/callback',
    {
      config: { auth: false },
      schema: {
        querystring: REDIRECT_QUERY,
        response: {
          200: {
            description: 'Consent completed (a browser sending Accept: text/html gets a page instead)',
            type: 'object', required: ['credential'], properties: { credential: CREDENTIAL_VIEW },
          },
          303: { description: 'A consent the CLI started: on to its loopback address with the same parameters', type: 'null' },
        },
      },
    },
    async (request, reply) => {
      reply.header('cache-control', 'no-store')
      const parsed = parseCookie(request.headers.cookie ?? '')
      const cookies = { [STATE_COOKIE]: parsed[STATE_COOKIE], [NONCE_COOKIE]: parsed[NONCE_COOKIE] }
      try {
        const consent = oauthConsent(deps)
        const loopback = await consent.loopbackFor(request.query, cookies)
        if (loopback) return reply.redirect(loopback, 303)
        const meta = await consent.callback(request.query, cookies)
        const cleared = { path: cookiePath(deps), maxAge: 0, httpOnly: true, sameSite: 'lax' as const }
        reply.header('set-cookie', [stringifySetCookie({ name: STATE_COOKIE, value: '', ...cleared }), stringifySetCookie({ name: NONCE_COOKIE, value: '', ...cleared })])
        if (wantsHtml(request)) return page(reply, 200, 'Authorized', `The credential ${meta.name} is authorized and active. You can close this window.`)
        return { credential: { id: meta.id, name: meta.name, provider: meta.provider, kind: meta.kind, status: meta.status } }
      } catch (err) {
        const e = refusal(err)
        if (!(e instanceof CorralError) || !wantsHtml(request)) throw e
        return page(reply, e.status, 'Not authorized', `${e.message}. Nothing was changed. (request ${request.id})`)
      }
    },
  )

  completeRoute(app, deps)
}

/** The CLI's finish: the binding `start` gave it and what its loopback address received. */
function completeRoute(app: FastifyInstance, deps: ServerDeps): void {
  app.post<{ Params: { id: string }; Body: { binding: string; query: Record<string, string> } }>(
    '/credentials/:id/oauth/complete',
    {
      config: { permission: START_PERMISSION },
      schema: {
        params: idParams,
        body: {
          type: 'object', additionalProperties: false, required: ['binding', 'query'],
          properties: { binding: { type: 'string', minLength: 1, maxLength: 200 }, query: REDIRECT_QUERY },
        },
        response: { 200: { type: 'object', required: ['credential'], properties: { credential: CREDENTIAL_VIEW } } },
      },
    },
    async (request, reply) => {
      reply.header('cache-control', 'no-store')
      const p = request.principal!
      const consent = oauthConsent(deps, 'oauth_unavailable')
      const meta = await deps.store.proxy.credentials.get(p.org.id, request.params.id)
      if (!meta) throw apiError('not_found', 'credential not found')
      assertReaches(request, meta)
      try {
        const done = await consent.complete({ orgId: p.org.id, userId: p.userId }, meta.id, request.body.query, request.body.binding)
        return { credential: { id: done.id, name: done.name, provider: done.provider, kind: done.kind, status: done.status } }
      } catch (err) {
        throw refusal(err)
      }
    },
  )
}

/** A consent refusal in the envelope: the state's own reasons 400, the provider's 502. */
function refusal(err: unknown): unknown {
  if (!(err instanceof OAuthCallbackError)) return err
  return apiError(STATE_REFUSALS.has(err.reason) ? 'oauth_state_invalid' : 'oauth_consent_failed', err.message, { reason: err.reason, ...(err.providerError ? { provider_error: err.providerError } : {}) })
}

/** The callback's path as browsers see it (under the public URL's own path, if it has one). */
function cookiePath(deps: ServerDeps): string {
  const base = deps.oauth?.publicUrl
  return base ? new URL(base.replace(/\/+$/, '') + CALLBACK_PATH).pathname : CALLBACK_PATH
}

function wantsHtml(request: FastifyRequest): boolean {
  return /\btext\/html\b/.test(String(request.headers.accept ?? ''))
}

const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

function page(reply: FastifyReply, status: number, title: string, text: string): string {
  reply.code(status).type('text/html; charset=utf-8').header('content-security-policy', "default-src 'none'")
  return `<!doctype html><html><head><meta charset="utf-8"><title>corral: ${escapeHtml(title)}</title></head><body><h1>${escapeHtml(title)}</h1><p>${escapeHtml(text)}</p></body></html>\n`
}
