// OAuth authorization-code credentials (docs/credentials.md "OAuth credentials"): a credential of
// kind `oauth` keeps its client secret in the credential's own sealed material; this migration
// adds what is OAuth-only. `credential_oauth`: the provider's endpoints (and its discovery document), the client id, the scopes
// and the sealed refresh token with a generation counter (a rotated refresh token is stored with a
// compare-and-swap on it). `oauth_states`: one row per consent started, looked up by the SHA-256 of
// the state (the state itself is never stored), with the hash of the browser's cookie nonce, the
// sealed PKCE verifier, the caller, an expiry and the single-use mark. Both go with their credential.
import type { StoreMigration } from './types.js'

export const oauthCredentials: StoreMigration = {
  name: '20261126T071500-oauth-oauth-credentials',
  async up(db) {
    await db.schema
      .createTable('credential_oauth')
      .addColumn('credential_id', 'text', (c) => c.primaryKey().references('credentials.id').onDelete('cascade'))
      .addColumn('org_id', 'text', (c) => c.notNull())
      .addColumn('issuer', 'text')
      .addColumn('authorization_endpoint', 'text', (c) => c.notNull())
      .addColumn('token_endpoint', 'text', (c) => c.notNull())
      .addColumn('metadata', 'text')
      .addColumn('client_id', 'text', (c) => c.notNull())
      .addColumn('scopes', 'text', (c) => c.notNull())
      .addColumn('refresh_ciphertext', 'text')
      .addColumn('generation', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('authorized_by_user_id', 'text')
      .addColumn('authorized_at', 'text')
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute()
    await db.schema
      .createTable('oauth_states')
      .addColumn('state_hash', 'text', (c) => c.primaryKey())
      .addColumn('org_id', 'text', (c) => c.notNull())
      .addColumn('credential_id', 'text', (c) => c.notNull().references('credentials.id').onDelete('cascade'))
      .addColumn('user_id', 'text', (c) => c.notNull())
      .addColumn('creator_id', 'text', (c) => c.notNull())
      .addColumn('nonce_hash', 'text', (c) => c.notNull())
      .addColumn('verifier_ciphertext', 'text', (c) => c.notNull())
      .addColumn('expires_at', 'text', (c) => c.notNull())
      .addColumn('used_at', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .execute()
    await db.schema.createIndex('oauth_states_expires_idx').on('oauth_states').column('expires_at').execute()
  },
}
