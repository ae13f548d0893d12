// Org secrets as the proxy reads them: decrypted per org into memory on first use (transforms
// read secrets synchronously), refreshed when the control plane announces a change on the store's
// bus (SECRETS_CHANNEL, payload = org id), and otherwise re-read at most every REFRESH_MS in the
// background so a missed notification heals itself.
import type { ProxyTablesRepo } from '../store/index.js'
import type { SecretLookup, SecretsSource } from './material.js'
import { secretBinding, type Sealer } from './sealer.js'

const REFRESH_MS = 30_000

export class OrgSecrets implements SecretsSource {
  readonly #cache = new Map<string, { values: Map<string, string>; at: number; loading?: Promise<void> }>()
  constructor(private readonly tables: Pick<ProxyTablesRepo, 'secrets'>, private readonly sealer: Sealer) {}

  lookupFor(orgId: string): SecretLookup {
    const entry = this.#cache.get(orgId)
    return (name) => entry?.values.get(name)
  }

  load(orgId: string): Promise<void> | undefined {
    const entry = this.#cache.get(orgId)
    if (entry && Date.now() - entry.at < REFRESH_MS) return undefined
    if (entry) {
      entry.loading ??= this.#read(orgId).catch(() => {}).finally(() => {
        entry.loading = undefined // a failed refresh is retried on a later request
      })
      return undefined // stale-while-revalidate: never block a request on a refresh
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
