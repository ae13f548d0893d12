// Agent roles (spec "Agent role"): the record every workspace is provisioned from. The table was
// created by the proxy's migration and extended by 20261122T110000-roles. Every method takes
// orgId first, so another org's id is "not found" by construction. `capabilities` is stored as the
// caps.yaml text the caller sent; the routes compile it before it gets here.
import type { Kysely } from 'kysely'
import { newId, nowIso, type AgentKind, type Environment, type PoolPolicy, type RoleResources, type ThinkingEffort } from '../../contract/index.js'
import type { RepoContext } from './context.js'

export interface AgentRolesTable {
  id: string
  org_id: string
  name: string
  display_name: string | null
  description: string | null
  provider_id: string
  model: string | null
  capabilities: string | null
  environment: string
  environment_description: string | null
  task_timeout_seconds: number | null
  idle_timeout_seconds: number | null
  thinking_effort: string | null
  max_continuations: number | null
  max_context_tokens: number | null
  pool_policy: string
  pool_size: number | null
  pool_max_size: number | null
  pack_ids: string | null
  /** JSON of RoleResources (docs/roles.md "Resources"); null: the server's defaults. */
  resources: string | null
  /** AgentKind (docs/roles.md "Agent kind"); null: the reference agent or an attached pack's. */
  agent_kind: string | null
  archived_at: string | null
  created_by: string | null
  created_at: string
  updated_at: string
}

/** An agent role with every spec field (absent optional fields are omitted, never null). */
export interface AgentRole {
  id: string
  org_id: string
  name: string
  display_name?: string
  description?: string
  provider_id: string
  /** Overrides the provider's default_model when set. */
  model?: string
  /** The caps.yaml text; it compiled when it was saved. */
  capabilities?: string
  environment: Environment
  environment_description?: string
  task_timeout_seconds?: number
  idle_timeout_seconds?: number
  thinking_effort?: ThinkingEffort
  max_continuations?: number
  max_context_tokens?: number
  pool_policy: PoolPolicy
  pool_size?: number
  pool_max_size?: number
  pack_ids: string[]
  /** Requests and limits of the agent container (Kubernetes runtime; docs/roles.md "Resources"). */
  resources?: RoleResources
  /** Which agent the role's workspaces run (docs/roles.md "Agent kind"); absent: corral's, or an attached pack's. */
  agent_kind?: AgentKind
  created_by?: string
  created_at: string
  updated_at: string
  archived_at?: string
}

/** The writable fields; `null` clears an optional one on update. */
export interface AgentRoleFields {
  name: string
  display_name?: string | null
  description?: string | null
  provider_id: string
  model?: string | null
  capabilities?: string | null
  environment?: Environment
  environment_description?: string | null
  task_timeout_seconds?: number | null
  idle_timeout_seconds?: number | null
  thinking_effort?: ThinkingEffort | null
  max_continuations?: number | null
  max_context_tokens?: number | null
  pool_policy?: PoolPolicy
  pool_size?: number | null
  pool_max_size?: number | null
  pack_ids?: string[]
  resources?: RoleResources | null
  agent_kind?: AgentKind | null
}
export type AgentRolePatch = Partial<AgentRoleFields>

const WRITABLE = [
  'name', 'display_name', 'description', 'provider_id', 'model', 'capabilities', 'environment', 'environment_description',
  'task_timeout_seconds', 'idle_timeout_seconds', 'thinking_effort', 'max_continuations', 'max_context_tokens',
  'pool_policy', 'pool_size', 'pool_max_size', 'pack_ids', 'resources', 'agent_kind',
] as const satisfies readonly (keyof AgentRoleFields)[]

function toRecord(row: AgentRolesTable): AgentRole {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(row)) {
    if (v === null || v === undefined || k === 'pack_ids' || k === 'resources') continue
    // pg returns integer columns as numbers, but be strict about it for bigint-ish drivers.
    out[k] = v
  }
  out.pack_ids = row.pack_ids ? (JSON.parse(row.pack_ids) as string[]) : []
  if (row.resources) out.resources = JSON.parse(row.resources) as RoleResources
  out.pool_policy = row.pool_policy ?? ''
  out.environment = row.environment ?? 'development'
  return out as unknown as AgentRole
}

function toColumns(fields: AgentRolePatch): Partial<AgentRolesTable> {
  const set: Record<string, unknown> = {}
  for (const key of WRITABLE) {
    const v = fields[key]
    if (v === undefined) continue
    set[key] = key === 'pack_ids' || (key === 'resources' && v !== null) ? JSON.stringify(v) : v
  }
  return set as Partial<AgentRolesTable>
}

// long-function: a repository: one closure over the database handle; each method is a short query and reads alone.
export function createAgentRolesRepository(ctx: RepoContext) {
  // workspaces: only role_id is read here (the delete guard); the workspace part owns that table.
  const db = ctx.db as unknown as Kysely<{ agent_roles: AgentRolesTable; workspaces: { org_id: string; role_id: string } }>
  return {
    async create(orgId: string, input: AgentRoleFields & { created_by?: string }): Promise<AgentRole> {
      const now = nowIso()
      const row: AgentRolesTable = {
        id: newId('role'),
        org_id: orgId,
        name: input.name,
        display_name: null,
        description: null,
        provider_id: input.provider_id,
        model: null,
        capabilities: null,
        environment: 'development',
        environment_description: null,
        task_timeout_seconds: null,
        idle_timeout_seconds: null,
        thinking_effort: null,
        max_continuations: null,
        max_context_tokens: null,
        pool_policy: '',
        pool_size: null,
        pool_max_size: null,
        pack_ids: JSON.stringify([]),
        resources: null,
        agent_kind: null,
        ...toColumns(input),
        archived_at: null,
        created_by: input.created_by ?? null,
        created_at: now,
        updated_at: now,
      }
      await db.insertInto('agent_roles').values(row).execute()
      return toRecord(row)
    },
    async get(orgId: string, id: string): Promise<AgentRole | undefined> {
      const row = await db.selectFrom('agent_roles').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst()
      return row && toRecord(row)
    },
    async getByName(orgId: string, name: string): Promise<AgentRole | undefined> {
      const row = await db.selectFrom('agent_roles').selectAll().where('org_id', '=', orgId).where('name', '=', name).executeTakeFirst()
      return row && toRecord(row)
    },
    /** Ordered by name; archived roles only with `includeArchived`; optionally only one provider's. */
    async list(orgId: string, opts: { includeArchived?: boolean; providerId?: string } = {}): Promise<AgentRole[]> {
      let q = db.selectFrom('agent_roles').selectAll().where('org_id', '=', orgId)
      if (!opts.includeArchived) q = q.where('archived_at', 'is', null)
      if (opts.providerId !== undefined) q = q.where('provider_id', '=', opts.providerId)
      return (await q.orderBy('name').orderBy('id').execute()).map(toRecord)
    },
    /** Applies the present fields (`pack_ids` replaces the list only when present); undefined when not found. */
    async update(orgId: string, id: string, patch: AgentRolePatch): Promise<AgentRole | undefined> {
      const res = await db
        .updateTable('agent_roles')
        .set({ ...toColumns(patch), updated_at: nowIso() })
        .where('org_id', '=', orgId)
        .where('id', '=', id)
        .executeTakeFirst()
      if (Number(res.numUpdatedRows) === 0) return undefined
      return this.get(orgId, id)
    },
    /** Sets or clears archived_at; undefined when not found. */
    async setArchived(orgId: string, id: string, archived: boolean): Promise<AgentRole | undefined> {
      const now = nowIso()
      const res = await db
        .updateTable('agent_roles')
        .set({ archived_at: archived ? now : null, updated_at: now })
        .where('org_id', '=', orgId)
        .where('id', '=', id)
        .executeTakeFirst()
      if (Number(res.numUpdatedRows) === 0) return undefined
      return this.get(orgId, id)
    },
    /** The provider-archive cascade: archives every not-yet-archived role of the provider; returns how many. */
    async archiveByProvider(orgId: string, providerId: string): Promise<number> {
      const now = nowIso()
      const res = await db
        .updateTable('agent_roles')
        .set({ archived_at: now, updated_at: now })
        .where('org_id', '=', orgId)
        .where('provider_id', '=', providerId)
        .where('archived_at', 'is', null)
        .executeTakeFirst()
      return Number(res.numUpdatedRows)
    },
    /** Ids of every role (archived included) that references the provider. */
    async idsByProvider(orgId: string, providerId: string): Promise<string[]> {
      const rows = await db.selectFrom('agent_roles').select('id').where('org_id', '=', orgId).where('provider_id', '=', providerId).execute()
      return rows.map((r) => r.id)
    },
    /** How many workspace rows (any state, archived included) reference the role: they pin it against delete. */
    async workspaceCount(orgId: string, id: string): Promise<number> {
      const row = await db
        .selectFrom('workspaces')
        .select((eb) => eb.fn.countAll<number | string>().as('n'))
        .where('org_id', '=', orgId)
        .where('role_id', '=', id)
        .executeTakeFirstOrThrow()
      return Number(row.n)
    },
    /** Deletes the row; returns what was deleted, undefined when not found. */
    async delete(orgId: string, id: string): Promise<AgentRole | undefined> {
      const existing = await this.get(orgId, id)
      if (!existing) return undefined
      const res = await db.deleteFrom('agent_roles').where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst()
      return Number(res.numDeletedRows) === 1 ? existing : undefined
    },
  }
}
export type AgentRolesRepository = ReturnType<typeof createAgentRolesRepository>
