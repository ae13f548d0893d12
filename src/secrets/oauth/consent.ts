// The control plane's side of an OAuth credential: create it (`pending`), start a consent
// (`oauth/start`: a state, a PKCE verifier and a binding nonce, stored hashed or sealed, bound to
// the credential and the caller, single use, expiring) and finish it (code → refresh token,
// sealed; status `active`; `credential_authorized`). A consent is finished only by whoever holds
// the nonce, so that a consent one person starts cannot be finished in another person's browser
// (the login-CSRF shape of OAuth): a browser holds it in the state cookie pair and finishes at the
// callback; the CLI holds it itself, names a loopback address at start, and the callback sends
// its browser there, from where the CLI finishes with the nonce (`complete`). Every refusal is an
// OAuthCallbackError with a reason and changes no credential. Provider text never leaves here.
import { createHash, randomBytes } from 'node:crypto'
import * as client from 'openid-client'
import { auditedMutation } from '../../audit/index.js'
import { SYSTEM_USER, apiError, type AuditSink } from '../../contract/index.js'
import type { CredentialMeta, OAuthClientRow, OAuthStateRow, Store } from '../../store/index.js'
import { MaterialInputError, NAME_PATTERN, type Actor } from '../admin.js'
import { CREDENTIALS_CHANNEL } from '../material.js'
import { credentialBinding, type Sealer } from '../sealer.js'
import { OAuthHttp, ProviderAddressRefused, type OAuthEndpoints } from './client.js'
import { OAUTH_KIND, oauthEndpoints, refreshBinding, type OAuthMaterial } from './vocabulary.js'

export const CALLBACK_PATH = '/v1/oauth/callback'
/** The two cookies `oauth/start` sets: the state itself and a nonce only this browser holds. */
export const STATE_COOKIE = 'corral_oauth_state'
export const NONCE_COOKIE = 'corral_oauth_nonce'
export const STATE_TTL_MS = 10 * 60_000

export type CallbackRefusal =
  | 'state_missing' | 'state_unknown' | 'state_reused' | 'state_expired' | 'cookie_missing' | 'cookie_mismatch' | 'binding_mismatch'
  | 'provider_error' | 'exchange_refused' | 'provider_unreachable' | 'no_refresh_token'

export class OAuthCallbackError extends Error {
  constructor(readonly reason: CallbackRefusal, message: string, readonly providerError?: string) {
    super(message)
  }
}

export interface CreateOAuthInput {
  name: string; provider: string; client_id?: string; client_secret?: string
  issuer?: string; authorization_url?: string; token_url?: string; scopes?: string[]
  /** A personal credential of the actor (docs/credentials.md "Personal credentials"). */
  personal?: boolean
}

export interface ConsentOptions {
  store: Store
  sealer: Sealer
  audit: AuditSink
  http: OAuthHttp
  /** The public base URL browsers reach this server at; unset → `oauth/start` answers oauth_unavailable. */
  publicUrl: string | undefined
  /** Whether a provider slug is an OAuth family (policy data, passed in). */
  isOAuthProvider: (slug: string) => boolean
  stateTtlMs?: number
}

const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]{1,200}$/
const sha256 = (s: string): string => createHash('sha256').update(s).digest('base64url')

export class OAuthConsent {
  constructor(private readonly o: ConsentOptions) {}

  get redirectUri(): string | undefined {
    // Under the public URL's own path too (a reverse proxy may publish the API below a prefix).
    return this.o.publicUrl ? this.o.publicUrl.replace(/\/+$/, '') + CALLBACK_PATH : undefined
  }

  /** A new OAuth credential, `pending` until its first consent completes. */
  // long-function: validation of each field, then one transaction and its event
  async create(actor: Actor, input: CreateOAuthInput): Promise<CredentialMeta & { scopes: string[] }> {
    if (!NAME_PATTERN.test(input.name)) throw new MaterialInputError('name', 'must match [A-Za-z][A-Za-z0-9_.-]{0,63}')
    if (!this.o.isOAuthProvider(input.provider)) throw new MaterialInputError('provider', 'kind oauth needs an OAuth provider (google, microsoft)')
    if (!input.client_id) throw new MaterialInputError('client_id', 'required for kind oauth')
    if (!input.client_secret) throw new MaterialInputError('client_secret', 'required for kind oauth')
    const scopes = input.scopes ?? []
    if (scopes.length === 0) throw new MaterialInputError('scopes', 'at least one scope is required for kind oauth')
    const bad = scopes.find((s) => !SCOPE_TOKEN.test(s))
    if (bad !== undefined) throw new MaterialInputError('scopes', `not an OAuth scope token: ${JSON.stringify(bad.slice(0, 60))}`)
    const endpoints = await this.#endpoints(input, input.client_id, input.client_secret)
    const owner = input.personal ? actor.userId : undefined
    if (await this.o.store.proxy.credentials.exists(actor.orgId, input.name, owner ?? null)) {
      throw new MaterialInputError('name', owner ? 'you already have a personal credential with this name' : 'a credential with this name exists', 'conflict')
    }
    const material: OAuthMaterial = { client_secret: input.client_secret }
    return auditedMutation(this.o.store, this.o.audit, async (tx, record) => {
      const created = await tx.proxy.credentials.create(actor.orgId, {
        name: input.name, provider: input.provider, kind: OAUTH_KIND, created_by_user_id: actor.userId, ...(owner ? { owner_user_id: owner } : {}),
        ciphertext: this.o.sealer.seal(JSON.stringify(material), credentialBinding(actor.orgId, input.name, owner)),
      })
      // The credentials table writes static kinds `active`; an OAuth credential is `pending` before anyone sees it.
      await tx.oauth.flipStatus(actor.orgId, created.id, created.status, 'pending')
      await tx.oauth.createClient(actor.orgId, {
        credential_id: created.id, issuer: endpoints.issuer, authorization_endpoint: endpoints.authorization_endpoint,
        token_endpoint: endpoints.token_endpoint, metadata: endpoints.metadata ?? null, client_id: input.client_id!, scopes,
      })
      tx.notify(CREDENTIALS_CHANNEL, actor.orgId)
      const meta = { ...created, status: 'pending', scopes }
      record({
        org_id: actor.orgId, user_id: actor.userId, event_type: 'credential_created',
        detail: {
          resource_id: meta.id, name: meta.name, provider: meta.provider, kind: meta.kind, scopes, status: meta.status,
          ...(meta.owner_user_id ? { owner_user_id: meta.owner_user_id } : {}),
        },
      })
      return meta
    })
  }

  async #endpoints(input: CreateOAuthInput, clientId: string, secret: string): Promise<OAuthEndpoints> {
    if (input.issuer !== undefined) {
      if (input.authorization_url !== undefined || input.token_url !== undefined) throw new MaterialInputError('issuer', 'give either issuer or authorization_url and token_url, not both')
      httpsUrl('issuer', input.issuer)
      await this.#reachable('issuer', input.issuer)
      let found: OAuthEndpoints
      try {
        found = await this.o.http.discover(input.issuer, clientId, secret)
      } catch (err) {
        // A redirect (or a rebinding answer) to a refused address is said as such.
        const refused = OAuthHttp.refusal(err)
        if (refused) throw new MaterialInputError('issuer', `discovery was sent to an address that ${refused.message}`)
        // The provider's own words stay out of the answer (they may quote anything).
        throw new MaterialInputError('issuer', 'OpenID Connect discovery of this issuer failed (unreachable, not HTTPS-trusted, or not a valid discovery document)')
      }
      // The token endpoint is where serve sends the code and the refresh token: the document may name any host.
      await this.#reachable('issuer', found.token_endpoint, 'the discovered token_endpoint ')
      return found
    }
    if (input.authorization_url === undefined || input.token_url === undefined) throw new MaterialInputError('issuer', 'required for kind oauth, unless authorization_url and token_url are given')
    const endpoints = { issuer: null, authorization_endpoint: httpsUrl('authorization_url', input.authorization_url), token_endpoint: httpsUrl('token_url', input.token_url) }
    // Only the token endpoint is fetched by serve; the authorization URL is where the browser goes.
    await this.#reachable('token_url', endpoints.token_endpoint)
    return endpoints
  }

  /** A provider URL serve would refuse to connect to is refused at create, with the field named. */
  async #reachable(field: string, url: string, what = ''): Promise<void> {
    try {
      await this.o.http.checkUrl(url)
    } catch (err) {
      if (err instanceof ProviderAddressRefused) throw new MaterialInputError(field, `${what}${err.message}`)
      throw err
    }
  }

  /** Whether consent can be started here at all: a public callback URL (the master key is the route's check). */
  available(): string | undefined {
    return this.redirectUri ? undefined : 'no public URL is configured for the OAuth callback (set --public-url or CORRAL_PUBLIC_URL)'
  }

  /**
   * Starts consent for an OAuth credential the caller may act on; the route has checked who.
   * `loopbackUri`: the CLI's loopback address (http://127.0.0.1 or [::1], a port) the callback
   * sends the browser to; the nonce is then the binding secret only the CLI holds.
   */
  async start(actor: Actor & { creatorId: string }, credentialId: string, loopbackUri?: string): Promise<{ authUrl: string; state: string; nonce: string; expiresAt: Date }> {
    const redirectUri = this.redirectUri
    if (!redirectUri) throw apiError('oauth_unavailable', this.available()!)
    const loopback = loopbackUri === undefined ? null : loopbackUrl(loopbackUri)
    const { cred, row } = await this.#load(actor.orgId, credentialId)
    const state = client.randomState()
    const nonce = randomBytes(32).toString('base64url')
    const verifier = client.randomPKCECodeVerifier()
    const stateHash = sha256(state)
    const expiresAt = new Date(Date.now() + (this.o.stateTtlMs ?? STATE_TTL_MS))
    await this.o.store.oauth.purgeStates(new Date().toISOString())
    await this.o.store.oauth.createState({
      state_hash: stateHash, org_id: actor.orgId, credential_id: cred.id, user_id: actor.userId, creator_id: actor.creatorId,
      nonce_hash: sha256(nonce), verifier_ciphertext: this.o.sealer.seal(verifier, stateBinding(stateHash)), expires_at: expiresAt.toISOString(),
      loopback_uri: loopback,
    })
    const config = this.o.http.configuration(oauthEndpoints(row), row.client_id)
    const params: Record<string, string> = {
      redirect_uri: redirectUri, scope: row.scopes.join(' '), state, response_type: 'code',
      code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
      // A refresh token on every consent, re-consent included (Google sends one only with these).
      prompt: 'consent', ...(cred.provider === 'google' ? { access_type: 'offline' } : {}),
    }
    return { authUrl: client.buildAuthorizationUrl(config, params).href, state, nonce, expiresAt }
  }

  async #load(orgId: string, credentialId: string) {
    const cred = await this.o.store.oauth.credential(orgId, credentialId)
    if (!cred) throw apiError('not_found', 'credential not found')
    const row = cred.kind === OAUTH_KIND ? await this.o.store.oauth.client(orgId, credentialId) : undefined
    if (!row) throw apiError('validation_error', 'id: not an OAuth credential (only kind oauth has a consent flow)', { fields: { id: 'not an OAuth credential' } })
    return { cred, row }
  }

  /** A state that is present, known, unused and unexpired; else the refusal. */
  async #state(query: Record<string, string | undefined>): Promise<{ state: string; stateHash: string; st: OAuthStateRow }> {
    const state = query.state
    if (!state) throw new OAuthCallbackError('state_missing', 'the callback carries no state')
    const stateHash = sha256(state)
    const st = await this.o.store.oauth.state(stateHash)
    if (!st) throw new OAuthCallbackError('state_unknown', 'this consent is unknown (never started, or its credential was deleted)')
    if (st.used_at) throw new OAuthCallbackError('state_reused', 'this consent was already completed or refused; start it again')
    if (Date.parse(st.expires_at) <= Date.now()) throw new OAuthCallbackError('state_expired', 'this consent expired; start it again')
    return { state, stateHash, st }
  }

  /**
   * Where the callback sends a browser that carries no state cookies, for a consent the CLI started:
   * its loopback address with the provider's parameters. Nothing is claimed or exchanged here; the
   * CLI that receives them finishes with its binding (`complete`). Undefined: not such a callback.
   */
  async loopbackFor(query: Record<string, string | undefined>, cookies: Record<string, string | undefined>): Promise<string | undefined> {
    if (cookies[STATE_COOKIE] !== undefined || cookies[NONCE_COOKIE] !== undefined) return undefined
    const { st } = await this.#state(query)
    if (!st.loopback_uri) return undefined
    const url = new URL(st.loopback_uri)
    for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, v)
    return url.href
  }

  /**
   * The provider's redirect back in the browser that started the consent: `query` as received,
   * `cookies` as the browser sent them. The state is checked (known, unused, unexpired) and the
   * cookie pair must match it (none: `cookie_missing`; another's: `cookie_mismatch`) before the
   * state is claimed and the code exchanged; every refusal leaves the credential as it was.
   */
  async callback(query: Record<string, string | undefined>, cookies: Record<string, string | undefined>): Promise<CredentialMeta> {
    const { state, stateHash, st } = await this.#state(query)
    const sc = cookies[STATE_COOKIE]
    const nc = cookies[NONCE_COOKIE]
    if (sc === undefined && nc === undefined) {
      throw new OAuthCallbackError('cookie_missing', 'this browser did not start this consent (it sent no state cookies); start it again in the browser you consent in, or with `corral credential authorize`')
    }
    if (sc !== state || nc === undefined || sha256(nc) !== st.nonce_hash) {
      throw new OAuthCallbackError('cookie_mismatch', 'this browser did not start this consent (the state cookies do not match)')
    }
    return this.#finish(query, state, stateHash, st)
  }

  /**
   * A consent the CLI started, finished by the CLI: the provider's parameters its loopback
   * received, and the binding secret `start` gave it. Only the user who started it, for the
   * credential it was started for, with that binding.
   */
  async complete(actor: Actor, credentialId: string, query: Record<string, string | undefined>, binding: string): Promise<CredentialMeta> {
    const { state, stateHash, st } = await this.#state(query)
    if (!st.loopback_uri || st.org_id !== actor.orgId || st.user_id !== actor.userId || st.credential_id !== credentialId || sha256(binding) !== st.nonce_hash) {
      throw new OAuthCallbackError('binding_mismatch', 'this consent was not started by this client (the binding does not match)')
    }
    return this.#finish(query, state, stateHash, st)
  }

  async #finish(query: Record<string, string | undefined>, state: string, stateHash: string, st: OAuthStateRow): Promise<CredentialMeta> {
    if (!(await this.o.store.oauth.claimState(stateHash, new Date().toISOString()))) {
      throw new OAuthCallbackError('state_reused', 'this consent was already completed or refused; start it again')
    }
    if (query.error !== undefined) {
      const code = /^[a-z_]{1,64}$/.test(query.error) ? query.error : 'invalid_error_code'
      throw new OAuthCallbackError('provider_error', `the provider did not grant consent (${code})`, code)
    }
    const { cred, row } = await this.#load(st.org_id, st.credential_id)
    const refresh = await this.#exchange(row, cred.name, query, state, this.o.sealer.open(st.verifier_ciphertext, stateBinding(stateHash)))
    return this.#activate(st, cred, row, refresh)
  }

  async #exchange(row: OAuthClientRow, name: string, query: Record<string, string | undefined>, state: string, verifier: string): Promise<string> {
    const sealed = await this.o.store.oauth.clientSecret(row.org_id, row.credential_id)
    if (!sealed) throw new OAuthCallbackError('state_unknown', 'the credential of this consent no longer exists')
    const material = JSON.parse(this.o.sealer.open(sealed.ciphertext, credentialBinding(row.org_id, name, sealed.owner_user_id))) as OAuthMaterial
    const config = this.o.http.configuration(oauthEndpoints(row), row.client_id, material.client_secret)
    const url = new URL(this.redirectUri!)
    for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, v)
    let tokens: client.TokenEndpointResponse
    try {
      tokens = await client.authorizationCodeGrant(config, url, { pkceCodeVerifier: verifier, expectedState: state, idTokenExpected: false })
    } catch (err) {
      if (err instanceof client.ResponseBodyError || err instanceof client.AuthorizationResponseError) {
        throw new OAuthCallbackError('exchange_refused', `the provider refused the code exchange (${err.error})`, /^[a-z_]{1,64}$/.test(err.error) ? err.error : undefined)
      }
      throw new OAuthCallbackError('provider_unreachable', 'the provider could not be reached for the code exchange, or answered with something that is not OAuth')
    }
    if (!tokens.refresh_token) throw new OAuthCallbackError('no_refresh_token', 'the provider issued no refresh token (the scopes must allow offline access)')
    return tokens.refresh_token
  }

  async #activate(st: { org_id: string; user_id: string }, cred: { id: string; name: string; provider: string; kind: string; status: string }, row: OAuthClientRow, refresh: string): Promise<CredentialMeta> {
    const base = { resource_id: cred.id, name: cred.name, provider: cred.provider, kind: cred.kind }
    await auditedMutation(this.o.store, this.o.audit, async (tx, record) => {
      const now = await tx.oauth.credential(st.org_id, cred.id)
      if (!now) throw new OAuthCallbackError('state_unknown', 'the credential of this consent no longer exists')
      await tx.oauth.authorize(st.org_id, cred.id, this.o.sealer.seal(refresh, refreshBinding(st.org_id, cred.id)), st.user_id)
      // Also from active to active: the record's updated_at shows a completed re-consent (the CLI waits on it).
      await tx.oauth.flipStatus(st.org_id, cred.id, now.status, 'active')
      tx.notify(CREDENTIALS_CHANNEL, st.org_id)
      const event = (type: 'credential_authorized' | 'credential_status', detail: Record<string, unknown>) =>
        record({ org_id: st.org_id, user_id: st.user_id || SYSTEM_USER, event_type: type, detail: { ...base, ...detail } })
      event('credential_authorized', { scopes: row.scopes, status: 'active' })
      // Re-consent of a credential the proxy had flipped: the way back is audited like the way out.
      if (now.status !== 'active' && now.status !== 'pending') event('credential_status', { from_status: now.status, to_status: 'active', reason: 'reauthorized', terminal: false })
    })
    const meta = await this.o.store.proxy.credentials.get(st.org_id, cred.id)
    return meta!
  }
}

function httpsUrl(field: string, raw: string): string {
  let u: URL
  try {
    u = new URL(raw)
  } catch {
    throw new MaterialInputError(field, 'must be an absolute https:// URL')
  }
  if (u.protocol !== 'https:') throw new MaterialInputError(field, 'must be an absolute https:// URL')
  if (u.username || u.password) throw new MaterialInputError(field, 'must not carry credentials')
  return u.href
}

const stateBinding = (stateHash: string): string => `oauth-state:${stateHash}`

/** A loopback redirect for a native client (RFC 8252 §7.3): http, a loopback IP literal, a port; nothing else. */
function loopbackUrl(raw: string): string {
  let u: URL
  try {
    u = new URL(raw)
  } catch {
    throw new MaterialInputError('loopback_uri', 'must be an http://127.0.0.1:<port>/ or http://[::1]:<port>/ URL')
  }
  if (u.protocol !== 'http:' || !['127.0.0.1', '[::1]'].includes(u.hostname) || !u.port || u.username || u.password || u.search || u.hash) {
    throw new MaterialInputError('loopback_uri', 'must be an http://127.0.0.1:<port>/ or http://[::1]:<port>/ URL with no query')
  }
  return u.href
}
