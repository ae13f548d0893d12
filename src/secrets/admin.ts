// Creating and deleting secrets and credentials: sealed at rest, announced on the store's bus so
// every proxy drops its cached copy, and audited (secret_* / credential_* events, metadata only).
// Used by the /v1 routes; never returns a value once stored.
import { auditedMutation, type RecordAudit } from '../audit/index.js'
import type { AuditSink, NewAuditEvent } from '../contract/index.js'
import type { CredentialMeta, SecretMeta, Store, StoreTransaction } from '../store/index.js'
import { CREDENTIALS_CHANNEL, CREDENTIAL_KINDS, SECRETS_CHANNEL, type CredentialKind, type CredentialMaterial } from './material.js'
import { credentialBinding, secretBinding, type Sealer } from './sealer.js'

export const NAME_PATTERN = /^[A-Za-z][A-Za-z0-9_.-]{0,63}$/

/** Thrown for input the caller must fix; the route maps it to validation_error with the field. */
export class MaterialInputError extends Error {
  constructor(readonly field: string, message: string, readonly kind: 'invalid' | 'conflict' = 'invalid') {
    super(message)
  }
}

export interface Actor { orgId: string; userId: string }

export interface CredentialInput {
  name: string; provider: string; kind: string; token?: string; username?: string; password?: string
  /** A personal credential of the actor instead of an org-wide one. */
  personal?: boolean
}

/** The owner of a personal credential in its events' detail; nothing for the org's. */
const ownerDetail = (meta: CredentialMeta): Record<string, string> => (meta.owner_user_id ? { owner_user_id: meta.owner_user_id } : {})

/**
 * Deletes a member's personal credentials inside the transaction that removes their membership,
 * queues the change announcement for after commit, and records one `credential_deleted` per
 * reaped credential (detail `reason: membership_removed`, attributed to the remover) in it.
 */
export async function reapPersonalCredentials(tx: StoreTransaction, record: RecordAudit, actor: Actor, userId: string): Promise<CredentialMeta[]> {
  const reaped = await tx.proxy.credentials.reap(actor.orgId, userId)
  if (reaped.length > 0) tx.notify(CREDENTIALS_CHANNEL, actor.orgId)
  for (const meta of reaped) {
    record({
      org_id: actor.orgId, user_id: actor.userId, event_type: 'credential_deleted',
      detail: { resource_id: meta.id, name: meta.name, provider: meta.provider, kind: meta.kind, ...ownerDetail(meta), reason: 'membership_removed' },
    })
  }
  return reaped
}

/**
 * Whether a provider slug names a provider a static credential can be created for. The provider
 * registry is policy data (src/policy/auth-providers.ts); the caller passes this check in so the
 * secrets part does not depend on the policy part.
 */
export type StaticProviderCheck = (provider: string) => boolean

export class OrgMaterialAdmin {
  readonly #tables: Store['proxy']
  constructor(private readonly store: Store, private readonly sealer: Sealer, private readonly audit: AuditSink, private readonly staticProvider: StaticProviderCheck) {
    this.#tables = store.proxy
  }

  /** The change and its audit event in one transaction; the proxies drop their cached copies after commit. */
  #mutate<T>(fn: (tx: StoreTransaction, record: RecordAudit) => Promise<T>): Promise<T> {
    return auditedMutation(this.store, this.audit, fn)
  }

  async setSecret(actor: Actor, name: string, value: string): Promise<SecretMeta> {
    if (!NAME_PATTERN.test(name)) throw new MaterialInputError('name', 'must match [A-Za-z][A-Za-z0-9_.-]{0,63}')
    if (typeof value !== 'string' || value.length === 0) throw new MaterialInputError('value', 'must be a non-empty string')
    const sealed = this.sealer.seal(value, secretBinding(actor.orgId, name))
    return this.#mutate(async (tx, record) => {
      const { meta } = await tx.proxy.secrets.put(actor.orgId, name, sealed, actor.userId)
      record(event(actor, 'secret_created', { resource_id: name, name }))
      tx.notify(SECRETS_CHANNEL, actor.orgId)
      return meta
    })
  }

  listSecrets(actor: Actor): Promise<SecretMeta[]> {
    return this.#tables.secrets.list(actor.orgId)
  }

  async deleteSecret(actor: Actor, name: string): Promise<boolean> {
    return this.#mutate(async (tx, record) => {
      if (!(await tx.proxy.secrets.delete(actor.orgId, name))) return false
      record(event(actor, 'secret_deleted', { resource_id: name, name }))
      tx.notify(SECRETS_CHANNEL, actor.orgId)
      return true
    })
  }

  /**
   * `personal`: the credential belongs to the actor (a member's personal credential; only a
   * signed-in user has one). Names are unique among the org's credentials and, separately, among
   * each member's personal ones.
   */
  async createCredential(actor: Actor, input: CredentialInput): Promise<CredentialMeta> {
    if (!NAME_PATTERN.test(input.name)) throw new MaterialInputError('name', 'must match [A-Za-z][A-Za-z0-9_.-]{0,63}')
    if (!(CREDENTIAL_KINDS as readonly string[]).includes(input.kind)) throw new MaterialInputError('kind', `must be one of ${CREDENTIAL_KINDS.join(', ')}`)
    if (!this.staticProvider(input.provider)) throw new MaterialInputError('provider', 'unknown or OAuth provider (OAuth credentials are not supported yet)')
    const kind = input.kind as CredentialKind
    let material: CredentialMaterial
    if (kind === 'basic_auth') {
      if (!input.password) throw new MaterialInputError('password', 'required for basic_auth')
      material = { username: input.username ?? '', password: input.password }
    } else {
      if (!input.token) throw new MaterialInputError('token', `required for ${kind}`)
      material = { token: input.token }
    }
    const owner = input.personal ? actor.userId : undefined
    if (await this.#tables.credentials.exists(actor.orgId, input.name, owner ?? null)) {
      throw new MaterialInputError('name', owner ? 'you already have a personal credential with this name' : 'a credential with this name exists', 'conflict')
    }
    const ciphertext = this.sealer.seal(JSON.stringify(material), credentialBinding(actor.orgId, input.name, owner))
    return this.#mutate(async (tx, record) => {
      const meta = await tx.proxy.credentials.create(actor.orgId, {
        name: input.name, provider: input.provider, kind, created_by_user_id: actor.userId, ...(owner ? { owner_user_id: owner } : {}), ciphertext,
      })
      record(event(actor, 'credential_created', {
        resource_id: meta.id, name: meta.name, provider: meta.provider, kind: meta.kind, scopes: [], status: meta.status, ...ownerDetail(meta),
      }))
      tx.notify(CREDENTIALS_CHANNEL, actor.orgId)
      return meta
    })
  }

  /** Every credential of the org (org-wide and personal), or with `owner` only that member's personal ones. */
  listCredentials(actor: Actor, filter: { owner?: string } = {}): Promise<CredentialMeta[]> {
    return this.#tables.credentials.list(actor.orgId, filter)
  }

  getCredential(actor: Actor, id: string): Promise<CredentialMeta | undefined> {
    return this.#tables.credentials.get(actor.orgId, id)
  }

  async deleteCredential(actor: Actor, id: string): Promise<CredentialMeta | undefined> {
    return this.#mutate(async (tx, record) => {
      const meta = await tx.proxy.credentials.delete(actor.orgId, id)
      if (!meta) return undefined
      record(event(actor, 'credential_deleted', { resource_id: meta.id, name: meta.name, provider: meta.provider, kind: meta.kind, ...ownerDetail(meta) }))
      tx.notify(CREDENTIALS_CHANNEL, actor.orgId)
      return meta
    })
  }
}

function event(actor: Actor, type: 'secret_created' | 'secret_deleted' | 'credential_created' | 'credential_deleted', detail: Record<string, unknown>): NewAuditEvent {
  return { org_id: actor.orgId, user_id: actor.userId, event_type: type, detail }
}
