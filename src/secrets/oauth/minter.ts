// Access tokens for the proxy, minted from an OAuth credential's refresh token: cached in memory
// (never written anywhere) until shortly before they expire, refreshed on demand with one refresh
// in flight per credential however many requests wait for it, a rotated refresh token stored with
// a compare-and-swap on the row's generation. A terminal refusal (invalid_grant, …) flips the
// credential `active → revoked` once and emits `credential_status`; a transient one (timeout,
// 5xx) only fails the request that asked. Errors leaving here carry no provider text.
import { SYSTEM_USER, type AuditSink } from '../../contract/index.js'
import type { OAuthClientRow, OAuthTablesRepo, Store } from '../../store/index.js'
import { CREDENTIALS_CHANNEL } from '../material.js'
import type { Sealer } from '../sealer.js'
import * as client from 'openid-client'
import { OAuthHttp, TerminalOAuthError, TransientOAuthError, classifyRefreshError } from './client.js'
import { oauthEndpoints, refreshBinding } from './vocabulary.js'

/** Without `expires_in`, an access token is used for this long. */
const DEFAULT_LIFETIME_MS = 5 * 60_000
/** Refreshed this long before it expires (at most half its lifetime, for short-lived tokens). */
const EARLY_MS = 60_000

/** What the broker hands over: the credential row it resolved and its client secret, decrypted. */
export interface OAuthCredentialRef { id: string; orgId: string; name: string; provider: string; clientSecret: string }

interface Cached { orgId: string; token: string; refreshAt: number; generation: number }

export interface OAuthMinterOptions {
  tables: Pick<OAuthTablesRepo, 'client' | 'rotate' | 'flipStatus' | 'credential'>
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

  async #refresh(ref: OAuthCredentialRef, retried = false): Promise<Cached> {
    const row = await this.o.tables.client(ref.orgId, ref.id)
    if (!row?.refresh_ciphertext) throw new TransientOAuthError()
    if (this.#dead.get(ref.id)?.generation === row.generation) throw new TerminalOAuthError('invalid_grant')
    const refreshToken = this.o.sealer.open(row.refresh_ciphertext, refreshBinding(ref.orgId, ref.id))
    const config = this.o.http.configuration(oauthEndpoints(row), row.client_id, ref.clientSecret)
    let tokens: client.TokenEndpointResponse
    try {
      this.refreshes++
      tokens = await client.refreshTokenGrant(config, refreshToken)
    } catch (err) {
      const failure = classifyRefreshError(err)
      if (failure instanceof TransientOAuthError) throw failure
      // Another process (or a re-consent) may have moved the refresh token on since it was read.
      const again = await this.o.tables.client(ref.orgId, ref.id)
      if (!retried && again && again.generation !== row.generation) return this.#refresh(ref, true)
      await this.#flip(ref, row, failure)
      throw failure
    }
    let generation = row.generation
    if (tokens.refresh_token && tokens.refresh_token !== refreshToken) {
      const sealed = this.o.sealer.seal(tokens.refresh_token, refreshBinding(ref.orgId, ref.id))
      // Lost only to a re-consent or another process's rotation; the access token is good either way.
      if (await this.o.tables.rotate(ref.orgId, ref.id, row.generation, sealed)) generation++
    }
    const lifetime = typeof tokens.expires_in === 'number' && tokens.expires_in > 0 ? tokens.expires_in * 1000 : DEFAULT_LIFETIME_MS
    const cached = { orgId: ref.orgId, token: tokens.access_token, refreshAt: this.#now() + lifetime - Math.min(EARLY_MS, lifetime / 2), generation }
    this.#cache.set(ref.id, cached)
    return cached
  }

  async #flip(ref: OAuthCredentialRef, row: OAuthClientRow, failure: TerminalOAuthError): Promise<void> {
    this.#dead.set(ref.id, { orgId: ref.orgId, generation: row.generation })
    this.#cache.delete(ref.id)
    const cred = await this.o.tables.credential(ref.orgId, ref.id)
    if (!cred || cred.status !== 'active') return
    if (!(await this.o.tables.flipStatus(ref.orgId, ref.id, 'active', 'revoked'))) return // another process flipped it first
    await this.o.audit.emit({
      org_id: ref.orgId, user_id: SYSTEM_USER, event_type: 'credential_status', category: 'audit', actor: 'policy-engine',
      detail: {
        resource_id: ref.id, name: cred.name, provider: cred.provider, kind: cred.kind,
        from_status: 'active', to_status: 'revoked', reason: failure.code, terminal: true,
      },
    })
    await this.o.notify?.(CREDENTIALS_CHANNEL, ref.orgId).catch(() => {})
  }
}
