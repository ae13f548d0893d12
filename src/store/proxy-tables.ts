// Repositories over the proxy's tables (migration 20261122T103000-proxy): the minimal
// providers / agent_roles / workspaces rows activation reads, and the encrypted secrets and
// credentials. Every method takes orgId first (cross-org reads are "not found" by construction),
// except the workspace lookup, whose org is checked by the caller against the verified token.
import { sql, type Kysely } from 'kysely'
import { newId, nowIso } from '../contract/index.js'

interface ProvidersTable {
  id: string; org_id: string; name: string; display_name: string | null; kind: string | null; domain: string | null
  archived_at: string | null; created_by: string | null; created_at: string; updated_at: string
}
interface AgentRolesTable {
  id: string; org_id: string; name: string; provider_id: string; model: string | null; capabilities: string | null
  environment: string; archived_at: string | null; created_by: string | null; created_at: string; updated_at: string
}
interface WorkspacesTable {
  id: string; org_id: string; role_id: string; state: string; environment: string | null
  created_by_user_id: string; created_at: string; updated_at: string
}
interface SecretsTable {
  org_id: string; name: string; ciphertext: string; created_by_user_id: string | null; created_at: string; updated_at: string
}
interface CredentialsTable {
  id: string; org_id: string; name: string; provider: string; kind: string; status: string; ciphertext: string
  created_by_user_id: string | null; owner_user_id: string | null; created_at: string; updated_at: string
}
interface TasksTable { id: string; workspace_id: string; status: string }
export interface ProxyTables {
  tasks: TasksTable
  providers: ProvidersTable
  agent_roles: AgentRolesTable
  workspaces: WorkspacesTable
  secrets: SecretsTable
  credentials: CredentialsTable
}

export interface WorkspaceRow {
  id: string
  org_id: string
  creator_user_id: string
  role: string
  provider: string
  environment: string
  capabilities: string | null
  state: string
}

export interface SecretMeta { name: string; created_at: string; updated_at: string }
export interface CredentialMeta {
  id: string; name: string; provider: string; kind: string; status: string; created_at: string; updated_at: string
  created_by_user_id?: string
  /** A member's personal credential: that member's user id; absent for the org's credentials. */
  owner_user_id?: string
}

/** The proxy's repositories over a store's Kysely handle (`store.db`). */
export function proxyTables(anyDb: Kysely<any>) {
  const db = anyDb as Kysely<ProxyTables>
  return { workspaces: workspacesTable(db), tasks: tasksTable(db), secrets: secretsTable(db), credentials: credentialsTable(db) }
}

/** A workspace with its role and provider, as the proxy resolves a token; and the rows tests and benches seed. */
function workspacesTable(db: Kysely<ProxyTables>) {
  return {
    async lookup(workspaceId: string): Promise<WorkspaceRow | undefined> {
      const row = await db
        .selectFrom('workspaces as w')
        .innerJoin('agent_roles as r', 'r.id', 'w.role_id')
        .innerJoin('providers as p', 'p.id', 'r.provider_id')
        .select([
          'w.id', 'w.org_id', 'w.created_by_user_id', 'w.state', 'w.environment as ws_env',
          'r.name as role', 'r.capabilities', 'r.environment as role_env', 'p.name as provider',
        ])
        .where('w.id', '=', workspaceId)
        .executeTakeFirst()
      if (!row) return undefined
      return {
        id: row.id, org_id: row.org_id, creator_user_id: row.created_by_user_id, role: row.role, provider: row.provider,
        environment: row.ws_env ?? row.role_env, capabilities: row.capabilities, state: row.state,
      }
    },
    async createProvider(orgId: string, p: { name: string; created_by?: string }): Promise<string> {
      const id = newId('prov')
      const now = nowIso()
      await db.insertInto('providers').values({
        id, org_id: orgId, name: p.name, display_name: null, kind: null, domain: null, archived_at: null,
        created_by: p.created_by ?? null, created_at: now, updated_at: now,
      }).execute()
      return id
    },
    async createRole(orgId: string, r: { name: string; provider_id: string; capabilities?: string | null; environment?: string; created_by?: string }): Promise<string> {
      const id = newId('role')
      const now = nowIso()
      await db.insertInto('agent_roles').values({
        id, org_id: orgId, name: r.name, provider_id: r.provider_id, model: null, capabilities: r.capabilities ?? null,
        environment: r.environment ?? 'development', archived_at: null, created_by: r.created_by ?? null, created_at: now, updated_at: now,
      }).execute()
      return id
    },
    async setRoleCapabilities(orgId: string, roleId: string, capabilities: string | null): Promise<void> {
      await db.updateTable('agent_roles').set({ capabilities, updated_at: nowIso() }).where('org_id', '=', orgId).where('id', '=', roleId).execute()
    },
    async create(orgId: string, w: { role_id: string; created_by_user_id: string; state?: string }): Promise<string> {
      const id = newId('ws')
      const now = nowIso()
      await db.insertInto('workspaces').values({
        id, org_id: orgId, role_id: w.role_id, state: w.state ?? 'idle', environment: null,
        created_by_user_id: w.created_by_user_id, created_at: now, updated_at: now,
      }).execute()
      return id
    },
    async setState(orgId: string, workspaceId: string, state: string): Promise<void> {
      await db.updateTable('workspaces').set({ state, updated_at: nowIso() }).where('org_id', '=', orgId).where('id', '=', workspaceId).execute()
    },
  }
}

function tasksTable(db: Kysely<ProxyTables>) {
  return {
    /** A task's workspace and status (the proxy's task-token check, task-liveness.ts). */
    async taskStatus(taskId: string): Promise<{ workspace_id: string; status: string } | undefined> {
      return db.selectFrom('tasks').select(['workspace_id', 'status']).where('id', '=', taskId).executeTakeFirst()
    },
  }
}

function secretsTable(db: Kysely<ProxyTables>) {
  return {
    /** Creates or replaces; returns whether it already existed. */
    async put(orgId: string, name: string, ciphertext: string, userId?: string): Promise<{ created: boolean; meta: SecretMeta }> {
      const now = nowIso()
      const existing = await db.selectFrom('secrets').select('created_at').where('org_id', '=', orgId).where('name', '=', name).executeTakeFirst()
      await db.insertInto('secrets')
        .values({ org_id: orgId, name, ciphertext, created_by_user_id: userId ?? null, created_at: now, updated_at: now })
        .onConflict((oc) => oc.columns(['org_id', 'name']).doUpdateSet({ ciphertext, updated_at: now }))
        .execute()
      return { created: !existing, meta: { name, created_at: existing?.created_at ?? now, updated_at: now } }
    },
    async list(orgId: string): Promise<SecretMeta[]> {
      return db.selectFrom('secrets').select(['name', 'created_at', 'updated_at']).where('org_id', '=', orgId).orderBy('name').execute()
    },
    async all(orgId: string): Promise<{ name: string; ciphertext: string }[]> {
      return db.selectFrom('secrets').select(['name', 'ciphertext']).where('org_id', '=', orgId).execute()
    },
    /** The oldest sealed secret of any org: serve's start-up check that its master key opens this database. */
    async oldest(): Promise<{ org_id: string; name: string; ciphertext: string } | undefined> {
      return db.selectFrom('secrets').select(['org_id', 'name', 'ciphertext']).orderBy('created_at').limit(1).executeTakeFirst()
    },
    async delete(orgId: string, name: string): Promise<boolean> {
      const r = await db.deleteFrom('secrets').where('org_id', '=', orgId).where('name', '=', name).executeTakeFirst()
      return Number(r.numDeletedRows) > 0
    },
  }
}

function credentialsTable(db: Kysely<ProxyTables>) {
  return {
    /** `owner_user_id` set: a member's personal credential; absent: the org's. */
    async create(orgId: string, c: { name: string; provider: string; kind: string; ciphertext: string; created_by_user_id?: string; owner_user_id?: string }): Promise<CredentialMeta> {
      const now = nowIso()
      const row = { id: newId('cred'), org_id: orgId, name: c.name, provider: c.provider, kind: c.kind, status: 'active', ciphertext: c.ciphertext,
        created_by_user_id: c.created_by_user_id ?? null, owner_user_id: c.owner_user_id ?? null, created_at: now, updated_at: now }
      await db.insertInto('credentials').values(row).execute()
      return metaOf(row)
    },
    /** The org's credentials and every member's personal ones, or (`owner`) one member's personal ones only. */
    async list(orgId: string, filter: { owner?: string } = {}): Promise<CredentialMeta[]> {
      let q = db.selectFrom('credentials').selectAll().where('org_id', '=', orgId)
      if (filter.owner !== undefined) q = q.where('owner_user_id', '=', filter.owner)
      // By name, the org's before the personal ones (NULLs sort differently on SQLite and Postgres).
      const rows = await q.orderBy('name').orderBy(sql`owner_user_id IS NOT NULL`).orderBy('owner_user_id').execute()
      return rows.map(metaOf)
    },
    async get(orgId: string, id: string): Promise<CredentialMeta | undefined> {
      const row = await db.selectFrom('credentials').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst()
      return row ? metaOf(row) : undefined
    },
    /** Whether a name is taken among the org's credentials (`owner` null) or among one member's personal ones. */
    async exists(orgId: string, name: string, owner: string | null): Promise<boolean> {
      const row = await db.selectFrom('credentials').select('id').where('org_id', '=', orgId).where('name', '=', name).where((eb) => (owner === null ? eb('owner_user_id', 'is', null) : eb('owner_user_id', '=', owner))).executeTakeFirst()
      return row !== undefined
    },
    /**
     * The one read that returns ciphertext: the broker's, by name. With `owner` (the workspace
     * creator), that member's personal credential of the name wins over the org's; without it,
     * only the org's (docs/credentials.md "Which credential a transform uses").
     */
    async material(orgId: string, name: string, owner?: string): Promise<{ id: string; kind: string; provider: string; status: string; ciphertext: string; owner_user_id: string | null } | undefined> {
      const rows = await db.selectFrom('credentials').select(['id', 'kind', 'provider', 'status', 'ciphertext', 'owner_user_id'])
        .where('org_id', '=', orgId).where('name', '=', name)
        .where((eb) => (owner === undefined ? eb('owner_user_id', 'is', null) : eb.or([eb('owner_user_id', 'is', null), eb('owner_user_id', '=', owner)])))
        .execute()
      return rows.find((r) => r.owner_user_id !== null) ?? rows[0]
    },
    async delete(orgId: string, id: string): Promise<CredentialMeta | undefined> {
      const row = await db.selectFrom('credentials').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst()
      if (!row) return undefined
      const r = await db.deleteFrom('credentials').where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst()
      return Number(r.numDeletedRows) > 0 ? metaOf(row) : undefined
    },
    /** The oldest sealed credential of any org (the master-key check, when no org has a secret). */
    async oldest(): Promise<{ org_id: string; name: string; owner_user_id: string | null; ciphertext: string } | undefined> {
      return db.selectFrom('credentials').select(['org_id', 'name', 'owner_user_id', 'ciphertext']).orderBy('created_at').limit(1).executeTakeFirst()
    },
    /** Deletes every personal credential of one member (membership removal); returns what was deleted. */
    async reap(orgId: string, owner: string): Promise<CredentialMeta[]> {
      const rows = await db.deleteFrom('credentials').where('org_id', '=', orgId).where('owner_user_id', '=', owner).returningAll().execute()
      return rows.map(metaOf).sort((a, b) => a.name.localeCompare(b.name))
    },
  }
}

export type ProxyTablesRepo = ReturnType<typeof proxyTables>

function metaOf(row: CredentialsTable): CredentialMeta {
  return {
    id: row.id, name: row.name, provider: row.provider, kind: row.kind, status: row.status, created_at: row.created_at, updated_at: row.updated_at,
    ...(row.created_by_user_id ? { created_by_user_id: row.created_by_user_id } : {}),
    ...(row.owner_user_id ? { owner_user_id: row.owner_user_id } : {}),
  }
}
