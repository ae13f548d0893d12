// Replay protection for signed webhooks: a nonce is accepted once until it expires.
import { nowIso } from '../../contract/index.js'
import type { RepoContext } from './context.js'

export function createWebhookNoncesRepository({ db }: RepoContext) {
  return {
    /** true the first time a nonce is seen; false on a replay. Expired nonces are purged on the way. */
    async remember(nonce: string, expiresAt: string): Promise<boolean> {
      await db.deleteFrom('webhook_nonces').where('expires_at', '<', nowIso()).execute()
      const res = await db
        .insertInto('webhook_nonces')
        .values({ nonce, expires_at: new Date(expiresAt).toISOString() })
        .onConflict((oc) => oc.column('nonce').doNothing())
        .executeTakeFirst()
      return Number(res.numInsertedOrUpdatedRows ?? 0) === 1
    },
  }
}
export type WebhookNoncesRepository = ReturnType<typeof createWebhookNoncesRepository>
