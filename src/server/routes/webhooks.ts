// The identity provider's invite-accepted webhook: outside bearer auth (`auth: false`), signed
// with HMAC-SHA256 over `<timestamp>.<raw body>` (webhook-signature.ts), stale or replayed
// deliveries refused. It activates the pending membership and records `membership_accepted`
// attributed to `system` (spec: webhook-driven events). The raw body is kept by a JSON parser
// registered in this plugin only, so the signature is checked over the exact bytes received.
import type { FastifyInstance } from 'fastify'
import { auditedMutation } from '../../audit/index.js'
import { SYSTEM_USER, apiError, notFound } from '../../contract/index.js'
import { statusOnly } from '../schemas/common.js'
import type { ServerDeps } from '../types.js'
import { WEBHOOK_HEADERS, WEBHOOK_TOLERANCE_SECONDS, verifyWebhookSignature } from '../webhook-signature.js'

export const INVITE_ACCEPTED_PATH = '/webhooks/identity/invite-accepted'

const body = {
  type: 'object',
  required: ['invitation_id'],
  additionalProperties: true,
  properties: {
    invitation_id: { type: 'string', minLength: 1, maxLength: 200 },
    /** The identity provider's own user id (recorded as `workos_user_id`, the spec's detail key). */
    user_id: { type: 'string', maxLength: 200 },
    email: { type: 'string', maxLength: 320 },
  },
} as const

declare module 'fastify' {
  interface FastifyRequest {
    rawBody?: string
  }
}

export async function webhookRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  const parseJson = app.getDefaultJsonParser('error', 'error')
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: 64 * 1024 }, (request, raw, done) => {
    request.rawBody = raw as string
    parseJson(request, raw as string, done)
  })

  app.post<{ Body: { invitation_id: string; user_id?: string; email?: string } }>(
    INVITE_ACCEPTED_PATH,
    { config: { auth: false }, schema: { body, response: { 200: statusOnly('accepted') } } },
    async (request) => {
      const secret = deps.config.webhookSecret
      if (!secret) throw apiError('service_unavailable', 'identity-provider webhooks are not configured (set CORRAL_IDP_WEBHOOK_SECRET)')
      const header = (name: string) => {
        const v = request.headers[name]
        return typeof v === 'string' ? v : undefined
      }
      const check = verifyWebhookSignature({
        secret,
        rawBody: request.rawBody ?? '',
        timestamp: header(WEBHOOK_HEADERS.timestamp),
        signature: header(WEBHOOK_HEADERS.signature),
      })
      if (!check.ok) throw apiError('invalid_signature', `webhook rejected: ${check.reason}`)
      const deliveryId = header(WEBHOOK_HEADERS.id)
      if (!deliveryId || deliveryId.length > 200) throw apiError('invalid_signature', `webhook rejected: missing ${WEBHOOK_HEADERS.id} header`)
      // Remember the id for twice the tolerance window: older deliveries fail the timestamp check anyway.
      const fresh = await deps.store.webhookNonces.remember(`idp:${deliveryId}`, new Date(Date.now() + 2 * WEBHOOK_TOLERANCE_SECONDS * 1000).toISOString())
      if (!fresh) throw apiError('invalid_signature', 'webhook rejected: delivery id already seen (replay)')

      const result = await auditedMutation(deps.store, deps.audit, async (tx, record) => {
        const result = await tx.memberships.accept(request.body.invitation_id)
        const m = result?.membership
        if (m && result.accepted) {
          record({
            org_id: m.org_id,
            user_id: SYSTEM_USER,
            event_type: 'membership_accepted',
            detail: { resource_id: m.user_id, email: m.email, role: m.role, workos_user_id: request.body.user_id ?? m.user_id, invitation_id: m.invitation_id },
          })
        }
        return result
      })
      if (!result) throw notFound('invitation')
      return { status: 'accepted' }
    },
  )
}
