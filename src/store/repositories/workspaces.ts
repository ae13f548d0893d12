// Workspaces and tasks over the `workspaces` table (created by the proxy's migration,
// extended by 20261122T111000-workspaces) and `tasks`. Every read takes orgId first, except the
// controller's own scans (`pending`, `byId`), which run for every org. Roles and providers are read
// with a plain join here so the controller does not depend on the role routes' repository shape.
import type { Kysely } from 'kysely'
import { newId, nowIso, TASK_STATUSES, type AgentKind, type DesiredState, type RoleResources, type WorkspaceState } from '../../contract/index.js'
import type { RepoContext } from './context.js'
import { poolRows } from './workspace-pools.js'

export type { DesiredState, WorkspaceState }
export type TaskStatus = (typeof TASK_STATUSES)[number]

export interface WorkspaceRecord {
  id: string
  org_id: string
  role_id: string
  role_name: string
  provider_id: string
  provider_name: string
  state: WorkspaceState
  desired_state: DesiredState
  /** `:own` identity (user id, or API key id). */
  created_by: string
  /** Audit attribution of the workspace's events (user id, `system` for API keys). */
  created_by_user_id: string
  task_count: number
  parent_workspace_id?: string
  fork_point_task_count?: number
  fork_source_snapshot_ref?: string
  last_snapshot_ref?: string
  stopped_once: boolean
  /** Provisioned ahead for the role's warm pool, not yet claimed by a task. */
  pooled: boolean
  environment?: string
  failure?: string
  created_at: string
  updated_at: string
  last_activity_at?: string
  archived_at?: string
}

export interface TaskOptions {
  reset_session?: boolean
  environment?: string
  thinking_effort?: string
  max_continuations?: number
  max_context_tokens?: number
}

export interface TaskRecord {
  id: string
  org_id: string
  workspace_id: string
  status: TaskStatus
  reason?: string
  description: string
  options: TaskOptions
  metadata?: Record<string, unknown>
  /** File names uploaded with the task (under /data/uploads/<task id>/). */
  uploads: string[]
  summary?: string
  created_by: string
  created_at: string
  updated_at: string
  started_at?: string
  finished_at?: string
}

/** The role and provider a workspace runs with, read at each task start (edits apply to the next task). */
export interface RoleConfig {
  id: string
  org_id: string
  name: string
  provider_id: string
  provider_name: string
  provider_kind: string | null
  provider_base_url: string | null
  provider_domain: string | null
  model: string | null
  capabilities: string | null
  environment: string
  environment_description: string | null
  task_timeout_seconds: number | null
  idle_timeout_seconds: number | null
  thinking_effort: string | null
  max_continuations: number | null
  max_context_tokens: number | null
  pool_policy: string | null
  pool_size: number | null
  /** Attached packs, in the role's order (mounted in the workspace; docs/workspaces.md "Packs"). */
  pack_ids: string[]
  /** Requests and limits of the agent container (docs/roles.md "Resources"); null: the server's. */
  resources: RoleResources | null
  /** Which agent runs (docs/roles.md "Agent kind"); null: corral's, or an attached pack's. */
  agent_kind: AgentKind | null
  role_archived: boolean
  provider_archived: boolean
}

type Row = Record<string, any>

function workspaceOf(r: Row): WorkspaceRecord {
  const out: Row = {
    id: r.id, org_id: r.org_id, role_id: r.role_id, role_name: r.role_name, provider_id: r.provider_id, provider_name: r.provider_name,
    state: r.state, desired_state: r.desired_state, created_by: r.created_by ?? r.created_by_user_id, created_by_user_id: r.created_by_user_id,
    task_count: Number(r.task_count), stopped_once: Boolean(Number(r.stopped_once)), pooled: Boolean(Number(r.pooled ?? 0)), created_at: r.created_at, updated_at: r.updated_at,
  }
  for (const k of ['parent_workspace_id', 'fork_source_snapshot_ref', 'last_snapshot_ref', 'environment', 'failure', 'last_activity_at', 'archived_at']) {
    if (r[k] !== null && r[k] !== undefined) out[k] = r[k]
  }
  if (r.fork_point_task_count !== null && r.fork_point_task_count !== undefined) out.fork_point_task_count = Number(r.fork_point_task_count)
  return out as WorkspaceRecord
}

function taskOf(r: Row): TaskRecord {
  const out: Row = {
    id: r.id, org_id: r.org_id, workspace_id: r.workspace_id, status: r.status, description: r.description,
    options: JSON.parse(r.options || '{}'), uploads: JSON.parse(r.uploads || '[]'), created_by: r.created_by,
    created_at: r.created_at, updated_at: r.updated_at,
  }
  for (const k of ['reason', 'summary', 'started_at', 'finished_at']) if (r[k] !== null && r[k] !== undefined) out[k] = r[k]
  if (r.metadata) out.metadata = JSON.parse(r.metadata)
  return out as TaskRecord
}

export interface WorkspaceFilter {
  state?: string[]
  role?: string
  creator?: string
  limit?: number
}

/** `store.workspaces` (and a transaction's `tx.workspaces`): the lifecycle's and the routes' repository. */
export function createWorkspacesRepository(ctx: RepoContext) {
  return workspaceTables(ctx.db, ctx.dialect.capabilities.rowLocks)
}

function workspaceTables(anyDb: Kysely<any>, rowLocks: boolean) {
  const db = anyDb as Kysely<any>
  return { role: (orgId: string, ref: { id?: string; name?: string }) => readRole(db, orgId, ref), ...workspaceRows(db), ...poolRows(db, rowLocks), tasks: taskRows(db) }
}

/** The role and provider a workspace runs with (by id or name), read at each task start. */
async function readRole(db: Kysely<any>, orgId: string, ref: { id?: string; name?: string }): Promise<RoleConfig | undefined> {
  let q = db.selectFrom('agent_roles as r').innerJoin('providers as p', 'p.id', 'r.provider_id')
    .selectAll('r')
    .select(['p.name as provider_name', 'p.kind as provider_kind', 'p.domain as provider_domain', 'p.archived_at as provider_archived_at'])
    .where('r.org_id', '=', orgId)
  q = ref.id !== undefined ? q.where('r.id', '=', ref.id) : q.where('r.name', '=', ref.name ?? '')
  const r = (await q.executeTakeFirst()) as Row | undefined
  if (!r) return undefined
  // base_url / default_model arrive with the role engineer's migration; read them when present.
  const extra = (await db.selectFrom('providers').selectAll().where('id', '=', r.provider_id).executeTakeFirst()) as Row | undefined
  return {
    id: r.id, org_id: r.org_id, name: r.name, provider_id: r.provider_id, provider_name: r.provider_name,
    provider_kind: r.provider_kind ?? null, provider_base_url: extra?.base_url ?? null, provider_domain: r.provider_domain ?? null,
    model: r.model ?? extra?.default_model ?? null, capabilities: r.capabilities ?? null, environment: r.environment ?? 'development',
    environment_description: r.environment_description ?? null, task_timeout_seconds: num(r.task_timeout_seconds),
    idle_timeout_seconds: num(r.idle_timeout_seconds), thinking_effort: r.thinking_effort ?? null,
    max_continuations: num(r.max_continuations), max_context_tokens: num(r.max_context_tokens),
    pool_policy: r.pool_policy ?? null, pool_size: num(r.pool_size), pack_ids: packIds(r.pack_ids),
    resources: r.resources ? (JSON.parse(r.resources) as RoleResources) : null,
    agent_kind: (r.agent_kind as AgentKind | null | undefined) ?? null,
    role_archived: r.archived_at !== null && r.archived_at !== undefined, provider_archived: r.provider_archived_at !== null && r.provider_archived_at !== undefined,
  }
}

/** One workspace's row: create, read, list, update, and the reconcile scan. */
function workspaceRows(db: Kysely<any>) {
  const selectWorkspace = () =>
    db.selectFrom('workspaces as w')
      .innerJoin('agent_roles as r', 'r.id', 'w.role_id')
      .innerJoin('providers as p', 'p.id', 'r.provider_id')
      .selectAll('w')
      .select(['r.name as role_name', 'p.id as provider_id', 'p.name as provider_name'])

  return {
    async create(orgId: string, w: {
      role_id: string; created_by: string; created_by_user_id: string; environment?: string; pooled?: boolean
      parent_workspace_id?: string; fork_point_task_count?: number; fork_source_snapshot_ref?: string
    }): Promise<string> {
      const id = newId('ws')
      const now = nowIso()
      await db.insertInto('workspaces').values({
        id, org_id: orgId, role_id: w.role_id, state: 'provisioning', desired_state: 'running', environment: w.environment ?? null,
        created_by: w.created_by, created_by_user_id: w.created_by_user_id, task_count: 0,
        parent_workspace_id: w.parent_workspace_id ?? null, fork_point_task_count: w.fork_point_task_count ?? null,
        fork_source_snapshot_ref: w.fork_source_snapshot_ref ?? null, created_at: now, updated_at: now, last_activity_at: now,
        pooled: w.pooled ? 1 : 0,
      }).execute()
      return id
    },

    async get(orgId: string, id: string): Promise<WorkspaceRecord | undefined> {
      const r = await selectWorkspace().where('w.org_id', '=', orgId).where('w.id', '=', id).executeTakeFirst()
      return r ? workspaceOf(r) : undefined
    },

    /** Any org (the controller acts on ids it already holds). */
    async byId(id: string): Promise<WorkspaceRecord | undefined> {
      const r = await selectWorkspace().where('w.id', '=', id).executeTakeFirst()
      return r ? workspaceOf(r) : undefined
    },

    async list(orgId: string, f: WorkspaceFilter = {}): Promise<WorkspaceRecord[]> {
      let q = selectWorkspace().where('w.org_id', '=', orgId)
      if (f.state?.length) q = q.where('w.state', 'in', f.state)
      if (f.role) q = q.where((eb: any) => eb.or([eb('r.name', '=', f.role), eb('r.id', '=', f.role)]))
      if (f.creator) q = q.where('w.created_by', '=', f.creator)
      const rows = await q.orderBy('w.created_at', 'desc').orderBy('w.id', 'desc').limit(f.limit ?? 500).execute()
      return rows.map(workspaceOf)
    },

    /** Workspaces whose actual state is not settled, or that have queued work: what reconcile visits. */
    async unsettled(): Promise<string[]> {
      const rows = await db.selectFrom('workspaces').select('id')
        .where((eb: any) => eb.or([
          eb('state', 'in', ['provisioning', 'busy', 'stopping']),
          eb.and([eb('state', '=', 'idle'), eb('desired_state', '!=', 'running')]),
          eb('id', 'in', eb.selectFrom('tasks').select('workspace_id').where('status', '=', 'submitted')),
        ]))
        .execute()
      return rows.map((r: Row) => r.id as string)
    },

    async update(id: string, set: Partial<{
      state: WorkspaceState; desired_state: DesiredState; task_count: number; last_snapshot_ref: string | null
      stopped_once: number; archived_at: string | null; failure: string | null; last_activity_at: string
      /** Who asked for the `desired_state` written with it (the stop's or archive's caller); null: nobody in particular. */
      desired_by: string | null
    }>): Promise<void> {
      await db.updateTable('workspaces').set({ ...set, updated_at: nowIso() }).where('id', '=', id).execute()
    },

    /** Who asked for the workspace's current desired state (a stop or archive by a caller), if recorded. */
    async desiredBy(id: string): Promise<string | undefined> {
      const r = await db.selectFrom('workspaces').select('desired_by').where('id', '=', id).executeTakeFirst()
      return (r as Row | undefined)?.desired_by ?? undefined
    },

    /** Compare-and-set on the actual state; false when another writer moved it first. */
    async transition(id: string, from: readonly WorkspaceState[], to: WorkspaceState, extra: Record<string, unknown> = {}): Promise<boolean> {
      const r = await db.updateTable('workspaces').set({ state: to, ...extra, updated_at: nowIso() }).where('id', '=', id).where('state', 'in', from).executeTakeFirst()
      return Number(r.numUpdatedRows) > 0
    },
  }
}

/** Tasks: created with their workspace or as follow-ups, started and finished once. */
function taskRows(db: Kysely<any>) {
  return {
    async create(orgId: string, t: { id?: string; workspace_id: string; description: string; options: TaskOptions; metadata?: Record<string, unknown>; uploads?: string[]; created_by: string }): Promise<TaskRecord> {
      const now = nowIso()
      const row = {
        id: t.id ?? newId('task'), org_id: orgId, workspace_id: t.workspace_id, status: 'submitted', reason: null, description: t.description,
        options: JSON.stringify(t.options), metadata: t.metadata ? JSON.stringify(t.metadata) : null, uploads: JSON.stringify(t.uploads ?? []),
        summary: null, created_by: t.created_by, created_at: now, updated_at: now, started_at: null, finished_at: null,
      }
      await db.insertInto('tasks').values(row).execute()
      return taskOf(row)
    },
    async get(orgId: string, id: string): Promise<TaskRecord | undefined> {
      const r = await db.selectFrom('tasks').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst()
      return r ? taskOf(r) : undefined
    },
    async byId(id: string): Promise<TaskRecord | undefined> {
      const r = await db.selectFrom('tasks').selectAll().where('id', '=', id).executeTakeFirst()
      return r ? taskOf(r) : undefined
    },
    async forWorkspace(orgId: string, workspaceId: string, limit = 500): Promise<TaskRecord[]> {
      const rows = await db.selectFrom('tasks').selectAll().where('org_id', '=', orgId).where('workspace_id', '=', workspaceId)
        .orderBy('created_at', 'asc').orderBy('id', 'asc').limit(limit).execute()
      return rows.map(taskOf)
    },
    /** The task that blocks a new one: submitted or running. */
    async active(workspaceId: string): Promise<TaskRecord | undefined> {
      const r = await db.selectFrom('tasks').selectAll().where('workspace_id', '=', workspaceId).where('status', 'in', ['submitted', 'running'])
        .orderBy('created_at', 'asc').orderBy('id', 'asc').executeTakeFirst()
      return r ? taskOf(r) : undefined
    },
    async nextSubmitted(workspaceId: string): Promise<TaskRecord | undefined> {
      const r = await db.selectFrom('tasks').selectAll().where('workspace_id', '=', workspaceId).where('status', '=', 'submitted')
        .orderBy('created_at', 'asc').orderBy('id', 'asc').executeTakeFirst()
      return r ? taskOf(r) : undefined
    },
    async running(workspaceId: string): Promise<TaskRecord[]> {
      const rows = await db.selectFrom('tasks').selectAll().where('workspace_id', '=', workspaceId).where('status', '=', 'running').execute()
      return rows.map(taskOf)
    },
    async start(id: string): Promise<boolean> {
      const now = nowIso()
      const r = await db.updateTable('tasks').set({ status: 'running', started_at: now, updated_at: now }).where('id', '=', id).where('status', '=', 'submitted').executeTakeFirst()
      return Number(r.numUpdatedRows) > 0
    },
    /** Moves a non-terminal task to a terminal status; false when it already ended (first writer wins). */
    async finish(id: string, status: 'completed' | 'failed' | 'cancelled', reason?: string, summary?: string): Promise<boolean> {
      const now = nowIso()
      const r = await db.updateTable('tasks')
        .set({ status, reason: reason ?? null, summary: summary ?? null, finished_at: now, updated_at: now })
        .where('id', '=', id).where('status', 'in', ['submitted', 'running']).executeTakeFirst()
      return Number(r.numUpdatedRows) > 0
    },
  }
}

export type WorkspacesRepository = ReturnType<typeof workspaceTables>

function packIds(v: unknown): string[] {
  if (typeof v !== 'string' || v === '') return []
  const ids: unknown = JSON.parse(v)
  return Array.isArray(ids) ? ids.filter((x): x is string => typeof x === 'string') : []
}

function num(v: unknown): number | null {
  return v === null || v === undefined ? null : Number(v)
}
