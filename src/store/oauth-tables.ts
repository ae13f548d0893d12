// Repositories over the OAuth tables (migration 20261126T071500-oauth-oauth-credentials) and the
// status column of an OAuth credential's row: the credential's provider configuration, its sealed
// refresh token with a generation counter (rotation is a compare-and-swap on it), the last access
// token and the refresh lease every replica sharing the database claims before it refreshes (one
// conditional update, so one refresh per credential across replicas), consent states (single use
// by a conditional update), and status flips that only happen from the status the
// caller saw. Every method that names a credential takes orgId first.
import type { Kysely } from 'kysely'
import { nowIso } from '../contract/index.js'

interface CredentialOAuthTable {
  credential_id: string; org_id: string; issuer: string | null; authorization_endpoint: string; token_endpoint: string; metadata: string | null
  client_id: string; scopes: string; refresh_ciphertext: string | null; generation: number
  authorized_by_user_id: string | null; authorized_at: string | null; updated_at: string
  access_ciphertext: string | null; access_refresh_at: number | string | null; lease_holder: string | null; lease_until: number | string | null
}
interface OAuthStatesTable {
  state_hash: string; org_id: string; credential_id: string; user_id: string; creator_id: string; nonce_hash: string
  verifier_ciphertext: string; expires_at: string; used_at: string | null; created_at: string; loopback_uri: string | null
}
interface CredentialStatusTable {
  id: string; org_id: string; name: string; provider: string; kind: string; status: string; updated_at: string
  ciphertext: string; owner_user_id: string | null
}
export interface OAuthTables {
  credential_oauth: CredentialOAuthTable
  oauth_states: OAuthStatesTable
  credentials: CredentialStatusTable
}

/** An OAuth credential's provider configuration (no secret in clear: the refresh token stays sealed). */
export interface OAuthClientRow {
  credential_id: string
  org_id: string
  issuer: string | null
  authorization_endpoint: string
  token_endpoint: string
  /** The discovery document (JSON object), for issuer-configured credentials. */
  metadata: Record<string, unknown> | null
  client_id: string
  scopes: string[]
  refresh_ciphertext: string | null
  generation: number
  /** The sealed access token of the last refresh (any replica's) and when it is due again (epoch ms). */
  access_ciphertext: string | null
  access_refresh_at: number | null
}

/** What a refresh leaves behind: the access token for every replica, and the rotated refresh token if there is one. */
export interface RefreshedTokens { accessCiphertext: string; refreshAt: number; refreshCiphertext?: string }

export interface OAuthStateRow {
  state_hash: string; org_id: string; credential_id: string; user_id: string; creator_id: string
  nonce_hash: string; verifier_ciphertext: string; expires_at: string; used_at: string | null
  /** Set for a consent the CLI started: where the callback sends the browser on (no cookies then). */
  loopback_uri: string | null
}

// long-function: one object literal of short methods over the OAuth tables, sharing `db`
export function oauthTables(anyDb: Kysely<any>) {
  const db = anyDb as Kysely<OAuthTables>
  return {
    async createClient(orgId: string, c: Omit<OAuthClientRow, 'org_id' | 'refresh_ciphertext' | 'generation' | 'access_ciphertext' | 'access_refresh_at'>): Promise<void> {
      await db.insertInto('credential_oauth').values({
        credential_id: c.credential_id, org_id: orgId, issuer: c.issuer, authorization_endpoint: c.authorization_endpoint,
        token_endpoint: c.token_endpoint, metadata: c.metadata ? JSON.stringify(c.metadata) : null, client_id: c.client_id, scopes: JSON.stringify(c.scopes), refresh_ciphertext: null,
        generation: 0, authorized_by_user_id: null, authorized_at: null, updated_at: nowIso(),
      }).execute()
    },
    async client(orgId: string, credentialId: string): Promise<OAuthClientRow | undefined> {
      const row = await db.selectFrom('credential_oauth').selectAll().where('org_id', '=', orgId).where('credential_id', '=', credentialId).executeTakeFirst()
      if (!row) return undefined
      return {
        credential_id: row.credential_id, org_id: row.org_id, issuer: row.issuer, authorization_endpoint: row.authorization_endpoint,
        token_endpoint: row.token_endpoint, metadata: row.metadata ? (JSON.parse(row.metadata) as Record<string, unknown>) : null, client_id: row.client_id, scopes: JSON.parse(row.scopes) as string[],
        refresh_ciphertext: row.refresh_ciphertext, generation: Number(row.generation),
        access_ciphertext: row.access_ciphertext, access_refresh_at: row.access_refresh_at === null ? null : Number(row.access_refresh_at),
      }
    },
    /** Consent completed: the new refresh token, one generation on; the old grant's access token is dropped. */
    async authorize(orgId: string, credentialId: string, refreshCiphertext: string, userId: string): Promise<void> {
      const now = nowIso()
      await db.updateTable('credential_oauth')
        .set((eb) => ({
          refresh_ciphertext: refreshCiphertext, generation: eb('generation', '+', 1), authorized_by_user_id: userId, authorized_at: now, updated_at: now,
          access_ciphertext: null, access_refresh_at: null,
        }))
        .where('org_id', '=', orgId).where('credential_id', '=', credentialId).execute()
    },
    /**
     * Claims the credential's refresh lease for `holder` until `until` (epoch ms), in one
     * conditional update: true for exactly one caller while the lease is free or expired at `now`.
     */
    async claimRefresh(orgId: string, credentialId: string, holder: string, now: number, until: number): Promise<boolean> {
      const r = await db.updateTable('credential_oauth').set({ lease_holder: holder, lease_until: until })
        .where('org_id', '=', orgId).where('credential_id', '=', credentialId)
        .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<=', now), eb('lease_holder', '=', holder)]))
        .executeTakeFirst()
      return Number(r.numUpdatedRows) === 1
    },
    /**
     * A refresh's result, stored only if nobody rotated or re-consented since `generation` was read:
     * the access token (and a rotated refresh token, one generation on); the lease is let go.
     */
    async storeRefreshed(orgId: string, credentialId: string, generation: number, t: RefreshedTokens): Promise<boolean> {
      const r = await db.updateTable('credential_oauth')
        .set({
          access_ciphertext: t.accessCiphertext, access_refresh_at: t.refreshAt, lease_holder: null, lease_until: null,
          ...(t.refreshCiphertext ? { refresh_ciphertext: t.refreshCiphertext, generation: generation + 1, updated_at: nowIso() } : {}),
        })
        .where('org_id', '=', orgId).where('credential_id', '=', credentialId).where('generation', '=', generation)
        .executeTakeFirst()
      return Number(r.numUpdatedRows) === 1
    },
    /** Lets go of the refresh lease if `holder` still has it. */
    async releaseRefresh(orgId: string, credentialId: string, holder: string): Promise<void> {
      await db.updateTable('credential_oauth').set({ lease_holder: null, lease_until: null })
        .where('org_id', '=', orgId).where('credential_id', '=', credentialId).where('lease_holder', '=', holder).execute()
    },
    /** The credential's status and identity (for events). */
    async credential(orgId: string, credentialId: string): Promise<Pick<CredentialStatusTable, 'id' | 'org_id' | 'name' | 'provider' | 'kind' | 'status'> | undefined> {
      return db.selectFrom('credentials').select(['id', 'org_id', 'name', 'provider', 'kind', 'status'])
        .where('org_id', '=', orgId).where('id', '=', credentialId).executeTakeFirst()
    },
    /** The sealed client secret (the credential's material) and its owner, by id. */
    async clientSecret(orgId: string, credentialId: string): Promise<{ ciphertext: string; owner_user_id: string | null } | undefined> {
      return db.selectFrom('credentials').select(['ciphertext', 'owner_user_id']).where('org_id', '=', orgId).where('id', '=', credentialId).executeTakeFirst()
    },
    /** Moves the status only from `from` (another process may have flipped it first); whether this call did. */
    async flipStatus(orgId: string, credentialId: string, from: string, to: string): Promise<boolean> {
      const r = await db.updateTable('credentials').set({ status: to, updated_at: nowIso() })
        .where('org_id', '=', orgId).where('id', '=', credentialId).where('status', '=', from).executeTakeFirst()
      return Number(r.numUpdatedRows) === 1
    },
    async createState(row: Omit<OAuthStateRow, 'used_at' | 'loopback_uri'> & { loopback_uri?: string | null }): Promise<void> {
      await db.insertInto('oauth_states').values({ ...row, loopback_uri: row.loopback_uri ?? null, used_at: null, created_at: nowIso() }).execute()
    },
    async state(stateHash: string): Promise<OAuthStateRow | undefined> {
      return db.selectFrom('oauth_states')
        .select(['state_hash', 'org_id', 'credential_id', 'user_id', 'creator_id', 'nonce_hash', 'verifier_ciphertext', 'expires_at', 'used_at', 'loopback_uri'])
        .where('state_hash', '=', stateHash).executeTakeFirst()
    },
    /** Marks a state used; true for exactly one caller, and only before it expires. */
    async claimState(stateHash: string, now: string): Promise<boolean> {
      const r = await db.updateTable('oauth_states').set({ used_at: now })
        .where('state_hash', '=', stateHash).where('used_at', 'is', null).where('expires_at', '>', now).executeTakeFirst()
      return Number(r.numUpdatedRows) === 1
    },
    /** States expired before `before` (used or not) are dropped. */
    async purgeStates(before: string): Promise<number> {
      const r = await db.deleteFrom('oauth_states').where('expires_at', '<', before).executeTakeFirst()
      return Number(r.numDeletedRows)
    },
  }
}

export type OAuthTablesRepo = ReturnType<typeof oauthTables>
