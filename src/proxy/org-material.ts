// Secrets and credentials as the proxy reads them: decrypted per org into memory on first use
// (transforms read secrets synchronously), refreshed when the control plane announces a change
// on the store's bus (`corral_secrets` / `corral_credentials`, payload = org id), and otherwise
// re-read at most every REFRESH_MS in the background so a missed notification heals itself.
import type { ProxyTablesRepo } from '../store/proxy-tables.js'
import type { CredentialBroker, MintedCredential, SecretsSource } from './request-state.js'
import { credentialBinding, secretBinding, type Sealer } from './sealed.js'

export const SECRETS_CHANNEL = 'corral_secrets'
export const CREDENTIALS_CHANNEL = 'corral_credentials'
const REFRESH_MS = 30_000

export const CREDENTIAL_KINDS = ['static_token', 'basic_auth', 'query_key'] as const
export type CredentialKind = (typeof CREDENTIAL_KINDS)[number]

/** What a credential's sealed material decodes to. */
export interface CredentialMaterial { token?: string; username?: string; password?: string }

export class OrgSecrets implements SecretsSource {
  readonly #cache = new Map<string, { values: Map<string, string>; at: number; loading?: Promise<void> }>()
  constructor(private readonly tables: ProxyTablesRepo, private readonly sealer: Sealer) {}

  lookupFor(orgId: string): (name: string) => string | undefined {
    const entry = this.#cache.get(orgId)
    return (name) => entry?.values.get(name)
  }

  load(orgId: string): Promise<void> {
    const entry = this.#cache.get(orgId)
    if (entry && Date.now() - entry.at < REFRESH_MS) return Promise.resolve()
    if (entry) {
      entry.loading ??= this.#read(orgId).catch(() => {}).finally(() => {
        entry.loading = undefined // a failed refresh is retried on a later request
      })
      return Promise.resolve() // stale-while-revalidate: never block a request on a refresh
    }
    return this.#read(orgId)
  }

  invalidate(orgId: string): void {
    this.#cache.delete(orgId)
  }

  async #read(orgId: string): Promise<void> {
    const rows = await this.tables.secrets.all(orgId)
    const values = new Map<string, string>()
    for (const r of rows) {
      try {
        values.set(r.name, this.sealer.open(r.ciphertext, secretBinding(orgId, r.name)))
      } catch {
        // An undecryptable secret is absent: the transform that reads it reports apply_error.
      }
    }
    this.#cache.set(orgId, { values, at: Date.now() })
  }
}

export class StaticCredentialBroker implements CredentialBroker {
  readonly #cache = new Map<string, { value: MintedCredential | undefined; at: number }>()
  constructor(private readonly tables: ProxyTablesRepo, private readonly sealer: Sealer) {}

  async mint(orgId: string, name: string, provider: string): Promise<MintedCredential | undefined> {
    const key = `${orgId}\u0000${name}`
    const hit = this.#cache.get(key)
    if (hit && Date.now() - hit.at < REFRESH_MS) return hit.value?.provider === provider ? hit.value : undefined
    const row = await this.tables.credentials.material(orgId, name)
    let value: (MintedCredential & { provider: string }) | undefined
    if (row && row.status === 'active') {
      try {
        const m = JSON.parse(this.sealer.open(row.ciphertext, credentialBinding(orgId, name))) as CredentialMaterial
        if (row.kind === 'basic_auth' && m.password !== undefined) value = { kind: 'basic_auth', secret: m.password, username: m.username ?? '', provider: row.provider }
        else if ((row.kind === 'static_token' || row.kind === 'query_key') && m.token) value = { kind: row.kind, secret: m.token, provider: row.provider }
      } catch {
        value = undefined
      }
    }
    this.#cache.set(key, { value, at: Date.now() })
    return value?.provider === provider ? value : undefined
  }

  invalidate(orgId: string): void {
    for (const k of this.#cache.keys()) if (k.startsWith(`${orgId}\u0000`)) this.#cache.delete(k)
  }
}
