// API key mirror rows. The secret itself is never stored; `secret_hash` is only read by
// findByHash (the auth lookup) and never leaves this file in any other record.
import { newId, nowIso, type PermissionSet } from '../../contract/index.js'
import { compact, type RepoContext } from './context.js'
import type { Org } from './orgs.js'

/** The public columns of a key: what the API returns (plus `value` once, added by the route). */
export interface ApiKey {
  id: string
  org_id: string
  label: string
  prefix: string
  permission_set: PermissionSet
  created_by_user_id?: string
  created_at: string
  last_used_at?: string
}

const PUBLIC_COLUMNS = ['id', 'org_id', 'label', 'prefix', 'permission_set', 'created_by_user_id', 'created_at', 'last_used_at'] as const

export function createApiKeysRepository({ db }: RepoContext) {
  return {
    async create(
      orgId: string,
      input: { label: string; permission_set: PermissionSet; created_by_user_id?: string; secret_hash: string; prefix: string },
    ): Promise<ApiKey> {
      const row = {
        id: newId('key'),
        org_id: orgId,
        label: input.label,
        prefix: input.prefix,
        permission_set: input.permission_set,
        created_by_user_id: input.created_by_user_id ?? null,
        created_at: nowIso(),
        last_used_at: null,
      }
      await db.insertInto('api_keys').values({ ...row, secret_hash: input.secret_hash }).execute()
      return compact(row) as ApiKey
    },
    async list(orgId: string): Promise<ApiKey[]> {
      const rows = await db.selectFrom('api_keys').select(PUBLIC_COLUMNS).where('org_id', '=', orgId).orderBy('created_at').orderBy('id').execute()
      return rows.map((r) => compact(r) as ApiKey)
    },
    async get(orgId: string, id: string): Promise<ApiKey | undefined> {
      const row = await db.selectFrom('api_keys').select(PUBLIC_COLUMNS).where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst()
      return row && (compact(row) as ApiKey)
    },
    /** The auth lookup: the key with this secret hash and its org (for posture checks). */
    async findByHash(secretHash: string): Promise<{ key: ApiKey; org: Org } | undefined> {
      const row = await db
        .selectFrom('api_keys')
        .innerJoin('orgs', 'orgs.id', 'api_keys.org_id')
        .select(PUBLIC_COLUMNS.map((c) => `api_keys.${c}` as const))
        .select(['orgs.name as org_name', 'orgs.posture as org_posture', 'orgs.created_at as org_created_at'])
        .where('api_keys.secret_hash', '=', secretHash)
        .executeTakeFirst()
      if (!row) return undefined
      const { org_name, org_posture, org_created_at, ...key } = row
      return {
        key: compact(key) as ApiKey,
        org: { id: key.org_id, name: org_name, posture: org_posture as Org['posture'], created_at: org_created_at },
      }
    },
    /** Sets last_used_at (callers throttle; this is one indexed UPDATE). */
    async touchLastUsed(id: string, at: string = nowIso()): Promise<void> {
      await db.updateTable('api_keys').set({ last_used_at: at }).where('id', '=', id).execute()
    },
    /** Deletes the key; returns what was deleted (for the api_key_revoked event), undefined when not found. */
    async delete(orgId: string, id: string): Promise<ApiKey | undefined> {
      const key = await this.get(orgId, id)
      if (!key) return undefined
      const res = await db.deleteFrom('api_keys').where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst()
      return Number(res.numDeletedRows) === 1 ? key : undefined
    },
  }
}
export type ApiKeysRepository = ReturnType<typeof createApiKeysRepository>
