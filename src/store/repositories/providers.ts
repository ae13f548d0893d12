// Model providers (spec "Agent roles and providers"). The table was created by the proxy's
// migration and extended by 20261122T110000-roles; its row type lives here because the proxy
// keeps its own minimal view (proxy-tables.ts). Every method takes orgId first, so another org's
// id is "not found" by construction.
import type { Kysely } from 'kysely'
import { newId, nowIso, type ProviderKind } from '../../contract/index.js'
import { compact, type RepoContext } from './context.js'

export interface ProvidersTable {
  id: string
  org_id: string
  name: string
  display_name: string | null
  description: string | null
  kind: string | null
  domain: string | null
  base_url: string | null
  default_model: string | null
  archived_at: string | null
  created_by: string | null
  created_at: string
  updated_at: string
}

/** A provider as the API returns it (absent optional fields are omitted, never null). */
export interface Provider {
  id: string
  org_id: string
  name: string
  display_name?: string
  description?: string
  /** Always set through the API; rows created directly by the proxy's test helpers may lack it. */
  kind?: ProviderKind
  domain?: string
  base_url?: string
  default_model?: string
  created_by?: string
  created_at: string
  updated_at: string
  archived_at?: string
}

export interface ProviderInput {
  name: string
  display_name?: string | null
  description?: string | null
  kind: ProviderKind
  domain: string
  base_url?: string | null
  default_model?: string | null
  created_by?: string
}

/** Fields a PATCH may change; `null` clears an optional one. */
export type ProviderPatch = Partial<Omit<ProviderInput, 'created_by'>>

export function createProvidersRepository(ctx: RepoContext) {
  const db = ctx.db as unknown as Kysely<{ providers: ProvidersTable }>
  const toRecord = (row: ProvidersTable): Provider => compact(row) as Provider
  return {
    async create(orgId: string, input: ProviderInput): Promise<Provider> {
      const now = nowIso()
      const row: ProvidersTable = {
        id: newId('prov'),
        org_id: orgId,
        name: input.name,
        display_name: input.display_name ?? null,
        description: input.description ?? null,
        kind: input.kind,
        domain: input.domain,
        base_url: input.base_url ?? null,
        default_model: input.default_model ?? null,
        archived_at: null,
        created_by: input.created_by ?? null,
        created_at: now,
        updated_at: now,
      }
      await db.insertInto('providers').values(row).execute()
      return toRecord(row)
    },
    async get(orgId: string, id: string): Promise<Provider | undefined> {
      const row = await db.selectFrom('providers').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst()
      return row && toRecord(row)
    },
    /**
     * Inside a transaction: the provider, locked against a concurrent archive until commit (row lock
     * on Postgres; SQLite serialises writers anyway). Role create/unarchive use it so a role can
     * never be attached to a provider that is being archived.
     */
    async getForUse(orgId: string, id: string): Promise<Provider | undefined> {
      let q = db.selectFrom('providers').selectAll().where('org_id', '=', orgId).where('id', '=', id)
      if (ctx.dialect.capabilities.rowLocks) q = q.forUpdate()
      const row = await q.executeTakeFirst()
      return row && toRecord(row)
    },
    async getByName(orgId: string, name: string): Promise<Provider | undefined> {
      const row = await db.selectFrom('providers').selectAll().where('org_id', '=', orgId).where('name', '=', name).executeTakeFirst()
      return row && toRecord(row)
    },
    /** Ordered by name; archived providers only with `includeArchived`. */
    async list(orgId: string, opts: { includeArchived?: boolean } = {}): Promise<Provider[]> {
      let q = db.selectFrom('providers').selectAll().where('org_id', '=', orgId)
      if (!opts.includeArchived) q = q.where('archived_at', 'is', null)
      return (await q.orderBy('name').orderBy('id').execute()).map(toRecord)
    },
    /** Applies the present fields; returns the updated record, undefined when not found. */
    async update(orgId: string, id: string, patch: ProviderPatch): Promise<Provider | undefined> {
      const set: Partial<ProvidersTable> = { updated_at: nowIso() }
      for (const key of ['name', 'display_name', 'description', 'kind', 'domain', 'base_url', 'default_model'] as const) {
        if (patch[key] !== undefined) set[key] = patch[key] as never
      }
      const res = await db.updateTable('providers').set(set).where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst()
      if (Number(res.numUpdatedRows) === 0) return undefined
      return this.get(orgId, id)
    },
    /** Sets or clears archived_at; returns the updated record, undefined when not found. */
    async setArchived(orgId: string, id: string, archived: boolean): Promise<Provider | undefined> {
      const now = nowIso()
      const res = await db
        .updateTable('providers')
        .set({ archived_at: archived ? now : null, updated_at: now })
        .where('org_id', '=', orgId)
        .where('id', '=', id)
        .executeTakeFirst()
      if (Number(res.numUpdatedRows) === 0) return undefined
      return this.get(orgId, id)
    },
    /** Deletes the row; returns what was deleted, undefined when not found. */
    async delete(orgId: string, id: string): Promise<Provider | undefined> {
      const existing = await this.get(orgId, id)
      if (!existing) return undefined
      const res = await db.deleteFrom('providers').where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst()
      return Number(res.numDeletedRows) === 1 ? existing : undefined
    },
  }
}
export type ProvidersRepository = ReturnType<typeof createProvidersRepository>
