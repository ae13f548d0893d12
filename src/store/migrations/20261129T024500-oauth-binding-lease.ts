// OAuth consent binding and the cross-replica refresh (docs/credentials.md "OAuth credentials").
// `oauth_states.loopback_uri`: a consent started by the CLI names the loopback address its browser
// is sent back to, and its nonce is the binding secret the CLI holds instead of a cookie.
// `credential_oauth`: the sealed access token of the last refresh with the time it is refreshed at
// (every replica uses it instead of refreshing again), and the refresh lease (holder + expiry in
// epoch milliseconds) one replica claims with a conditional update before it calls the provider.
import type { StoreMigration } from './types.js'

export const oauthBindingLease: StoreMigration = {
  name: '20261129T024500-oauth-binding-lease',
  async up(db) {
    await db.schema.alterTable('oauth_states').addColumn('loopback_uri', 'text').execute()
    await db.schema.alterTable('credential_oauth').addColumn('access_ciphertext', 'text').execute()
    await db.schema.alterTable('credential_oauth').addColumn('access_refresh_at', 'bigint').execute()
    await db.schema.alterTable('credential_oauth').addColumn('lease_holder', 'text').execute()
    await db.schema.alterTable('credential_oauth').addColumn('lease_until', 'bigint').execute()
  },
}
