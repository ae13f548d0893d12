// Credential minting: a stored credential's sealed material turned into the value an auth
// transform places (where it goes is the proxy's business, by the provider's slug). Static kinds
// decrypt to their value; kind oauth hands its client secret to the OAuthMinter
// (src/secrets/oauth/), which mints an access token from the refresh token. `owner` is the
// workspace creator: their personal credential of the name wins over the org's (docs/credentials.md
// "Which credential a transform uses"). Rows are cached per (org, owner, name) for REFRESH_MS and
// dropped when the control plane announces a change (CREDENTIALS_CHANNEL); access tokens are
// cached by the minter until shortly before they expire.
import type { ProxyTablesRepo } from '../store/index.js'
import type { CredentialBroker, CredentialMaterial, MintedCredential } from './material.js'
import type { OAuthCredentialRef, OAuthMinter } from './oauth/index.js'
import { credentialBinding, type Sealer } from './sealer.js'

const REFRESH_MS = 30_000

interface Entry { value?: MintedCredential & { provider: string }; oauth?: OAuthCredentialRef; at: number }

export class StaticCredentialBroker implements CredentialBroker {
  /** org → owner ('' for the org's own) → credential name: looked up without building a key per request. */
  readonly #cache = new Map<string, Map<string, Map<string, Entry>>>()
  /** `oauth`: mints kind oauth; without it an OAuth credential cannot be minted (auth_unavailable). */
  constructor(private readonly tables: Pick<ProxyTablesRepo, 'credentials'>, private readonly sealer: Sealer, private readonly oauth?: OAuthMinter) {}

  /**
   * Undefined when the credential cannot be minted; rejects (no provider text) when its OAuth
   * provider refused or failed. A promise only when the row must be read or an OAuth token minted.
   */
  mint(orgId: string, name: string, provider: string, owner?: string): MintedCredential | undefined | Promise<MintedCredential | undefined> {
    const entry = this.#cache.get(orgId)?.get(owner ?? '')?.get(name)
    if (entry && Date.now() - entry.at < REFRESH_MS) return this.#minted(entry, provider)
    return this.#read(orgId, name, owner).then((fresh) => {
      let byOwner = this.#cache.get(orgId)
      if (!byOwner) this.#cache.set(orgId, (byOwner = new Map()))
      let byName = byOwner.get(owner ?? '')
      if (!byName) byOwner.set(owner ?? '', (byName = new Map()))
      byName.set(name, fresh)
      return this.#minted(fresh, provider)
    })
  }

  #minted(entry: Entry, provider: string): MintedCredential | undefined | Promise<MintedCredential | undefined> {
    if (entry.oauth) {
      if (entry.oauth.provider !== provider || !this.oauth) return undefined
      return this.oauth.mint(entry.oauth).then((secret) => ({ kind: 'oauth', secret, provider }))
    }
    return entry.value?.provider === provider ? entry.value : undefined
  }

  async #read(orgId: string, name: string, owner: string | undefined): Promise<Entry> {
    const row = await this.tables.credentials.material(orgId, name, owner)
    const at = Date.now()
    if (!row || row.status !== 'active') return { at }
    try {
      const m = JSON.parse(this.sealer.open(row.ciphertext, credentialBinding(orgId, name, row.owner_user_id))) as CredentialMaterial & { client_secret?: string }
      if (row.kind === 'oauth' && m.client_secret) return { oauth: { id: row.id, orgId, name, provider: row.provider, clientSecret: m.client_secret }, at }
      if (row.kind === 'basic_auth' && m.password !== undefined) return { value: { kind: 'basic_auth', secret: m.password, username: m.username ?? '', provider: row.provider }, at }
      if ((row.kind === 'static_token' || row.kind === 'query_key') && m.token) return { value: { kind: row.kind, secret: m.token, provider: row.provider }, at }
    } catch {
      // undecryptable material cannot be minted: the transform reports auth_unavailable
    }
    return { at }
  }

  invalidate(orgId: string): void {
    this.#cache.delete(orgId)
    this.oauth?.invalidate(orgId)
  }
}
