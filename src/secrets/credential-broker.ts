// Credential minting: a stored credential's sealed material turned into the value an auth
// transform places (where it goes is the proxy's business, by the provider's slug). Static kinds
// only; OAuth minting comes with a later issue. `owner` is the workspace creator: their personal
// credential of the name wins over the org's (docs/credentials.md "Which credential a transform
// uses"). Cached per (org, owner, name) for REFRESH_MS and dropped when the control plane
// announces a change (CREDENTIALS_CHANNEL).
import type { ProxyTablesRepo } from '../store/index.js'
import type { CredentialBroker, CredentialMaterial, MintedCredential } from './material.js'
import { credentialBinding, type Sealer } from './sealer.js'

const REFRESH_MS = 30_000

export class StaticCredentialBroker implements CredentialBroker {
  readonly #cache = new Map<string, { value: MintedCredential | undefined; at: number }>()
  constructor(private readonly tables: Pick<ProxyTablesRepo, 'credentials'>, private readonly sealer: Sealer) {}

  async mint(orgId: string, name: string, provider: string, owner?: string): Promise<MintedCredential | undefined> {
    const key = `${orgId}\u0000${owner ?? ''}\u0000${name}`
    const hit = this.#cache.get(key)
    if (hit && Date.now() - hit.at < REFRESH_MS) return hit.value?.provider === provider ? hit.value : undefined
    const row = await this.tables.credentials.material(orgId, name, owner)
    let value: (MintedCredential & { provider: string }) | undefined
    if (row && row.status === 'active') {
      try {
        const m = JSON.parse(this.sealer.open(row.ciphertext, credentialBinding(orgId, name, row.owner_user_id))) as CredentialMaterial
        if (row.kind === 'basic_auth' && m.password !== undefined) value = { kind: 'basic_auth', secret: m.password, username: m.username ?? '', provider: row.provider }
        else if ((row.kind === 'static_token' || row.kind === 'query_key') && m.token) value = { kind: row.kind, secret: m.token, provider: row.provider }
      } catch {
        value = undefined // undecryptable material cannot be minted: the transform reports auth_unavailable
      }
    }
    this.#cache.set(key, { value, at: Date.now() })
    return value?.provider === provider ? value : undefined
  }

  invalidate(orgId: string): void {
    for (const k of this.#cache.keys()) if (k.startsWith(`${orgId}\u0000`)) this.#cache.delete(k)
  }
}
