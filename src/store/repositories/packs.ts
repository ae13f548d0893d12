// Packs (spec "Pack"). A pack belongs to one org; with visibility `community` every org can read,
// attach and clone it, but only the owner writes it. Reads that take orgId return what that org
// may see (its own packs plus community ones); writes take orgId and touch only its own rows, so
// another org's id is "not found" (or, for a visible community pack, refused by the route).
import type { Kysely } from 'kysely'
import { newId, nowIso, type PackManifest, type PackOrigin, type PackTier, type PackVisibility } from '../../contract/index.js'
import type { RepoContext } from './context.js'

export interface PacksTable {
  id: string
  org_id: string
  name: string
  display_name: string
  description: string | null
  version: string
  tier: string
  visibility: string
  category: string | null
  capabilities: string | null
  suggested_packs: string | null
  image_origin: string
  image_ref: string | null
  image_digest: string | null
  size_bytes: number | string | null
  manifest: string
  created_by: string | null
  created_at: string
  updated_at: string
}

/** A pack row (absent optional fields are omitted, never null); `manifest` is the parsed pack.yaml. */
export interface PackRecord {
  id: string
  org_id: string
  name: string
  display_name: string
  description?: string
  version: string
  tier: PackTier
  visibility: PackVisibility
  category?: string
  capabilities?: string
  suggested_packs?: string
  image_origin: PackOrigin
  image_ref?: string
  image_digest?: string
  size_bytes?: number
  manifest: PackManifest
  created_by?: string
  created_at: string
  updated_at: string
}

export interface PackInput {
  name: string
  display_name: string
  description?: string | null
  version: string
  tier: PackTier
  visibility: PackVisibility
  category?: string | null
  capabilities?: string | null
  suggested_packs?: string | null
  image_origin: PackOrigin
  image_ref?: string | null
  image_digest?: string | null
  size_bytes?: number | null
  manifest: PackManifest
  created_by?: string
}

/** Fields an update may change; `null` clears an optional one. name, org and origin never change. */
export type PackPatch = Partial<Omit<PackInput, 'name' | 'image_origin' | 'created_by'>>

const PATCHABLE = [
  'display_name', 'description', 'version', 'tier', 'visibility', 'category', 'capabilities', 'suggested_packs',
  'image_ref', 'image_digest', 'size_bytes', 'manifest',
] as const satisfies readonly (keyof PackPatch)[]

function toRecord(row: PacksTable): PackRecord {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(row)) if (v !== null && v !== undefined) out[k] = v
  // bigint comes back as a string from pg.
  if (row.size_bytes !== null && row.size_bytes !== undefined) out.size_bytes = Number(row.size_bytes)
  out.manifest = JSON.parse(row.manifest) as PackManifest
  return out as unknown as PackRecord
}

function toColumns(fields: PackPatch): Partial<PacksTable> {
  const set: Record<string, unknown> = {}
  for (const key of PATCHABLE) {
    const v = fields[key]
    if (v === undefined) continue
    set[key] = key === 'manifest' ? JSON.stringify(v) : v
  }
  return set as Partial<PacksTable>
}

// long-function: a repository: one closure over the database handle; each method is a short query and reads alone.
export function createPacksRepository(ctx: RepoContext) {
  // agent_roles: only pack_ids and archived_at are read here (the in-use guard).
  const db = ctx.db as unknown as Kysely<{ packs: PacksTable; agent_roles: { id: string; org_id: string; pack_ids: string | null; archived_at: string | null } }>
  const visible = (orgId: string) => db.selectFrom('packs').selectAll().where((eb) => eb.or([eb('org_id', '=', orgId), eb('visibility', '=', 'community')]))
  return {
    async create(orgId: string, input: PackInput): Promise<PackRecord> {
      const now = nowIso()
      const row: PacksTable = {
        id: newId('pack'),
        org_id: orgId,
        name: input.name,
        display_name: input.display_name,
        description: input.description ?? null,
        version: input.version,
        tier: input.tier,
        visibility: input.visibility,
        category: input.category ?? null,
        capabilities: input.capabilities ?? null,
        suggested_packs: input.suggested_packs ?? null,
        image_origin: input.image_origin,
        image_ref: input.image_ref ?? null,
        image_digest: input.image_digest ?? null,
        size_bytes: input.size_bytes ?? null,
        manifest: JSON.stringify(input.manifest),
        created_by: input.created_by ?? null,
        created_at: now,
        updated_at: now,
      }
      await db.insertInto('packs').values(row).execute()
      return toRecord(row)
    },
    /** A pack the org may see: its own, or any org's community pack. */
    async get(orgId: string, id: string): Promise<PackRecord | undefined> {
      const row = await visible(orgId).where('id', '=', id).executeTakeFirst()
      return row && toRecord(row)
    },
    /** The org's own pack of that name (names are unique per org only). */
    async getByName(orgId: string, name: string): Promise<PackRecord | undefined> {
      const row = await db.selectFrom('packs').selectAll().where('org_id', '=', orgId).where('name', '=', name).executeTakeFirst()
      return row && toRecord(row)
    },
    /** Own packs and community packs, ordered by name; `owned` keeps only own, `name`/`category` filter exactly. */
    async list(orgId: string, opts: { owned?: boolean; name?: string; category?: string } = {}): Promise<PackRecord[]> {
      let q = opts.owned ? db.selectFrom('packs').selectAll().where('org_id', '=', orgId) : visible(orgId)
      if (opts.name !== undefined) q = q.where('name', '=', opts.name)
      if (opts.category !== undefined) q = q.where('category', '=', opts.category)
      return (await q.orderBy('name').orderBy('id').execute()).map(toRecord)
    },
    /** Applies the present fields to the org's own pack; undefined when it has no such pack. */
    async update(orgId: string, id: string, patch: PackPatch): Promise<PackRecord | undefined> {
      const res = await db
        .updateTable('packs')
        .set({ ...toColumns(patch), updated_at: nowIso() })
        .where('org_id', '=', orgId)
        .where('id', '=', id)
        .executeTakeFirst()
      if (Number(res.numUpdatedRows) === 0) return undefined
      const row = await db.selectFrom('packs').selectAll().where('id', '=', id).executeTakeFirst()
      return row && toRecord(row)
    },
    /** Deletes the org's own pack; returns what was deleted, undefined when not found. */
    async delete(orgId: string, id: string): Promise<PackRecord | undefined> {
      const row = await db.selectFrom('packs').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst()
      if (!row) return undefined
      const res = await db.deleteFrom('packs').where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst()
      return Number(res.numDeletedRows) === 1 ? toRecord(row) : undefined
    },
    /** The packs of `ids` the org may see, in the order of `ids`; missing or invisible ids are omitted. */
    async findVisible(orgId: string, ids: readonly string[]): Promise<PackRecord[]> {
      if (ids.length === 0) return []
      const rows = await visible(orgId).where('id', 'in', [...new Set(ids)]).execute()
      const byId = new Map(rows.map((r) => [r.id, toRecord(r)]))
      return ids.flatMap((id) => byId.get(id) ?? [])
    },
    /** Non-archived roles of any org whose pack_ids contain the pack (community packs are attached across orgs). */
    async rolesAttaching(packId: string): Promise<{ org_id: string; role_id: string }[]> {
      // pack_ids is a JSON array as text: a LIKE on the quoted id narrows the rows, the parse decides
      // (so `_` matching any character, or SQLite's case-insensitive LIKE, only widen the prefilter).
      const rows = await db
        .selectFrom('agent_roles')
        .select(['id', 'org_id', 'pack_ids'])
        .where('archived_at', 'is', null)
        .where('pack_ids', 'like', `%${JSON.stringify(packId)}%`)
        .orderBy('org_id')
        .orderBy('id')
        .execute()
      return rows.filter((r) => (JSON.parse(r.pack_ids ?? '[]') as string[]).includes(packId)).map((r) => ({ org_id: r.org_id, role_id: r.id }))
    },
    /** Whether any pack row (any org) still references the content digest. */
    async digestInUse(digest: string): Promise<boolean> {
      const row = await db.selectFrom('packs').select('id').where('image_digest', '=', digest).limit(1).executeTakeFirst()
      return row !== undefined
    },
  }
}
export type PacksRepository = ReturnType<typeof createPacksRepository>
