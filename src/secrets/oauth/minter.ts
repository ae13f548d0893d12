// Access tokens for the proxy, minted from an OAuth credential's refresh token. One refresh per
// credential at a time across every process sharing the database: requests in this process wait on
// one promise, and that promise first claims the credential's refresh lease in the store (a
// conditional update); a process that finds the lease held waits and reads the access token the
// holder stored instead of refreshing itself, because a provider with refresh-token reuse
// detection revokes the whole grant when it sees one rotating refresh token twice. The access
// token is kept in memory and, sealed like the refresh token, on the row for the other replicas,
// until shortly before it expires; a rotated refresh token is stored with a compare-and-swap on
// the row's generation. A terminal refusal (invalid_grant, …) flips the credential
// `active → revoked` once and emits `credential_status`; a transient one (timeout, 5xx) only
// fails the request that asked. Errors leaving here carry no provider text.
import { auditedMutation } from '../../audit/index.js'
import { SYSTEM_USER, type AuditSink } from '../../contract/index.js'
import type { OAuthClientRow, OAuthTablesRepo, Store } from '../../store/index.js'
import { CREDENTIALS_CHANNEL } from '../material.js'
import type { Sealer } from '../sealer.js'
import { randomBytes } from 'node:crypto'
import { hostname } from 'node:os'
import * as client from 'openid-client'
import { OAuthHttp, TerminalOAuthError, TransientOAuthError, classifyRefreshError } from './client.js'
import { accessBinding, oauthEndpoints, refreshBinding } from './vocabulary.js'

/** Without `expires_in`, an access token is used for this long. */
const DEFAULT_LIFETIME_MS = 5 * 60_000
/** Refreshed this long before it expires (at most half its lifetime, for short-lived tokens). */
const EARLY_MS = 60_000
/** How long a refresh lease holds: past the provider call's timeout, so a live holder never loses it mid-call. */
export const REFRESH_LEASE_MS = 30_000
/** How often a process waiting on another's lease reads the row again. */
const LEASE_POLL_MS = 100

/** What the broker hands over: the credential row it resolved and its client secret, decrypted. */
export interface OAuthCredentialRef { id: string; orgId: string; name: string; provider: string; clientSecret: string }

interface Cached { orgId: string; token: string; refreshAt: number; generation: number }

export interface OAuthMinterOptions {
  tables: Pick<OAuthTablesRepo, 'client' | 'credential' | 'claimRefresh' | 'storeRefreshed' | 'releaseRefresh'>
  /** A status flip and its credential_status event commit in one transaction. */
  store: Pick<Store, 'transaction'>
  sealer: Sealer
  audit: AuditSink
  http: OAuthHttp
  /** Announces a flip so every process drops its copies (Store.notify). */
  notify?: Store['notify']
  now?: () => number
}

export class OAuthMinter {
  readonly #cache = new Map<string, Cached>()
  readonly #inflight = new Map<string, Promise<Cached>>()
  /** Credentials this process saw refused for good, by generation: not asked again until a re-consent. */
  readonly #dead = new Map<string, { orgId: string; generation: number }>()
  readonly #now: () => number
  /** This minter's name on a refresh lease. */
  readonly #holder = `${hostname()}:${process.pid}:${randomBytes(6).toString('base64url')}`
  /** Refreshes performed (token endpoint calls) — for tests and counters; never a token. */
  refreshes = 0

  constructor(private readonly o: OAuthMinterOptions) {
    this.#now = o.now ?? Date.now
  }

  /** An access token for the credential; throws TerminalOAuthError / TransientOAuthError. */
  async mint(ref: OAuthCredentialRef): Promise<string> {
    const hit = this.#cache.get(ref.id)
    if (hit && this.#now() < hit.refreshAt) return hit.token
    let flight = this.#inflight.get(ref.id)
    if (!flight) {
      flight = this.#refresh(ref).finally(() => this.#inflight.delete(ref.id))
      this.#inflight.set(ref.id, flight)
    }
    return (await flight).token
  }

  /** Drops the org's cached tokens and refusals (the control plane announced a change: re-consent, delete). */
  invalidate(orgId: string): void {
    for (const [id, c] of this.#cache) if (c.orgId === orgId) this.#cache.delete(id)
    for (const [id, d] of this.#dead) if (d.orgId === orgId) this.#dead.delete(id)
  }

  /**
   * The access token from the row when another process stored a fresh one, else this process's
   * own refresh under the credential's lease; while another holds the lease, waits for its result.
   */
  async #refresh(ref: OAuthCredentialRef): Promise<Cached> {
    // Bounded: a holder that died lets its lease lapse after REFRESH_LEASE_MS, then this claims it.
    for (let polls = 0; polls <= (2 * REFRESH_LEASE_MS) / LEASE_POLL_MS; polls++) {
      const row = await this.#usable(ref)
      const stored = this.#stored(ref, row)
      if (stored) return stored
      if (await this.o.tables.claimRefresh(ref.orgId, ref.id, this.#holder, this.#now(), this.#now() + REFRESH_LEASE_MS)) {
        try {
          // Read again under the lease: the previous holder may have stored its token since.
          const fresh = await this.#usable(ref)
          return this.#stored(ref, fresh) ?? (await this.#call(ref, fresh))
        } finally {
          await this.o.tables.releaseRefresh(ref.orgId, ref.id, this.#holder).catch(() => {})
        }
      }
      await new Promise((r) => setTimeout(r, LEASE_POLL_MS))
    }
    throw new TransientOAuthError()
  }

  async #usable(ref: OAuthCredentialRef): Promise<OAuthClientRow & { refresh_ciphertext: string }> {
    const row = await this.o.tables.client(ref.orgId, ref.id)
    if (!row?.refresh_ciphertext) throw new TransientOAuthError()
    if (this.#dead.get(ref.id)?.generation === row.generation) throw new TerminalOAuthError('invalid_grant')
    return row as OAuthClientRow & { refresh_ciphertext: string }
  }

  /** The access token a refresh of this grant generation stored, while it is still fresh. */
  #stored(ref: OAuthCredentialRef, row: OAuthClientRow): Cached | undefined {
    if (!row.access_ciphertext || row.access_refresh_at === null || this.#now() >= row.access_refresh_at) return undefined
    let token: string
    try {
      token = this.o.sealer.open(row.access_ciphertext, accessBinding(ref.orgId, ref.id, row.generation))
    } catch {
      return undefined // sealed for another generation (a re-consent raced it): refresh
    }
    const cached = { orgId: ref.orgId, token, refreshAt: row.access_refresh_at, generation: row.generation }
    this.#cache.set(ref.id, cached)
    return cached
  }

  /** The provider's refresh, under the lease; its result stored for every process. */
  async #call(ref: OAuthCredentialRef, row: OAuthClientRow & { refresh_ciphertext: string }, retried = false): Promise<Cached> {
    const refreshToken = this.o.sealer.open(row.refresh_ciphertext, refreshBinding(ref.orgId, ref.id))
    const config = this.o.http.configuration(oauthEndpoints(row), row.client_id, ref.clientSecret)
    let tokens: client.TokenEndpointResponse
    try {
      this.refreshes++
      tokens = await client.refreshTokenGrant(config, refreshToken)
    } catch (err) {
      const failure = classifyRefreshError(err)
      if (failure instanceof TransientOAuthError) throw failure
      // A re-consent (or a process that held a lapsed lease) may have moved the refresh token on since it was read.
      const again = await this.o.tables.client(ref.orgId, ref.id)
      if (!retried && again?.refresh_ciphertext && again.generation !== row.generation) {
        return this.#stored(ref, again) ?? this.#call(ref, again as typeof row, true)
      }
      await this.#flip(ref, row, failure)
      throw failure
    }
    const rotated = !!tokens.refresh_token && tokens.refresh_token !== refreshToken
    const generation = row.generation + (rotated ? 1 : 0)
    const lifetime = typeof tokens.expires_in === 'number' && tokens.expires_in > 0 ? tokens.expires_in * 1000 : DEFAULT_LIFETIME_MS
    const refreshAt = this.#now() + lifetime - Math.min(EARLY_MS, lifetime / 2)
    // Lost only to a re-consent; the access token is good either way.
    await this.o.tables.storeRefreshed(ref.orgId, ref.id, row.generation, {
      accessCiphertext: this.o.sealer.seal(tokens.access_token, accessBinding(ref.orgId, ref.id, generation)), refreshAt,
      ...(rotated ? { refreshCiphertext: this.o.sealer.seal(tokens.refresh_token!, refreshBinding(ref.orgId, ref.id)) } : {}),
    })
    const cached = { orgId: ref.orgId, token: tokens.access_token, refreshAt, generation }
    this.#cache.set(ref.id, cached)
    return cached
  }

  async #flip(ref: OAuthCredentialRef, row: OAuthClientRow, failure: TerminalOAuthError): Promise<void> {
    this.#dead.set(ref.id, { orgId: ref.orgId, generation: row.generation })
    this.#cache.delete(ref.id)
    const cred = await this.o.tables.credential(ref.orgId, ref.id)
    if (!cred || cred.status !== 'active') return
    const flipped = await auditedMutation(this.o.store, this.o.audit, async (tx, record) => {
      if (!(await tx.oauth.flipStatus(ref.orgId, ref.id, 'active', 'revoked'))) return false // another process flipped it first
      record({
        org_id: ref.orgId, user_id: SYSTEM_USER, event_type: 'credential_status', actor: 'policy-engine',
        detail: {
          resource_id: ref.id, name: cred.name, provider: cred.provider, kind: cred.kind,
          from_status: 'active', to_status: 'revoked', reason: failure.code, terminal: true,
        },
      })
      return true
    })
    if (!flipped) return
    await this.o.notify?.(CREDENTIALS_CHANNEL, ref.orgId).catch(() => {})
  }
}
