// First start on an empty store: org `default`, an owner user and an owner API key
// (`full_access`) whose secret is returned once for printing and written to
// `<data-dir>/admin.key` (mode 0600). Replicas starting together race on a settings marker
// (first writer wins), so exactly one of them mints the key; later starts reuse everything.
import { randomUUID } from 'node:crypto'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { auditedMutation } from '../audit/index.js'
import { SYSTEM_USER, type AuditSink } from '../contract/index.js'
import type { Org, Store } from '../store/index.js'
import { displayPrefix, generateApiKeySecret, hashApiKeySecret } from './auth/api-key-secret.js'

export const BOOTSTRAP_MARKER = 'bootstrap.v1'
export const DEFAULT_ORG = 'default'
export const ADMIN_KEY_FILE = 'admin.key'

export interface BootstrapResult {
  org: Org
  /** Present only on the start that created the key: print it once. */
  adminKey?: { id: string; value: string; path: string }
}

export async function bootstrap(store: Store, audit: AuditSink, opts: { dataDir: string; ownerEmail?: string }): Promise<BootstrapResult> {
  const org = (await store.orgs.getByName(DEFAULT_ORG)) ?? (await store.orgs.create({ name: DEFAULT_ORG })) ?? (await store.orgs.getByName(DEFAULT_ORG))
  if (!org) throw new Error('could not create or find the default org')
  const claim = randomUUID()
  if ((await store.settings.setIfAbsent(BOOTSTRAP_MARKER, claim)) !== claim) return { org }

  const user = await store.users.create({ email: opts.ownerEmail ?? 'owner@corral.local' })
  await store.memberships.invite(org.id, { user_id: user.id, email: user.email, role: 'owner', status: 'active' })
  const { key, value } = await createOwnerKey(store, audit, org.id, 'bootstrap owner key', user.id)
  const path = join(opts.dataDir, ADMIN_KEY_FILE)
  await writeFile(path, `${value}\n`, { mode: 0o600 })
  return { org, adminKey: { id: key.id, value, path } }
}

/** A full_access key for an org, recorded as `api_key_created` by `system` (operator action). */
export async function createOwnerKey(store: Store, audit: AuditSink, orgId: string, label: string, createdBy?: string) {
  const value = generateApiKeySecret()
  const key = await auditedMutation(store, audit, async (tx, record) => {
    const key = await tx.apiKeys.create(orgId, {
      label,
      permission_set: 'full_access',
      secret_hash: hashApiKeySecret(value),
      prefix: displayPrefix(value),
      ...(createdBy ? { created_by_user_id: createdBy } : {}),
    })
    record({
      org_id: orgId,
      user_id: SYSTEM_USER,
      event_type: 'api_key_created',
      detail: { resource_id: key.id, label: key.label, prefix: key.prefix, permission_set: key.permission_set },
    })
    return key
  })
  return { key, value }
}
