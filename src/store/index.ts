// The store: one object over SQLite or Postgres with every repository, notify/listen and
// transactions. `openStore` picks the dialect from the URL (the only place that looks at it),
// migrates to latest, and hands back a Store whose repositories scope every read by org.

import type { Kysely } from 'kysely'
import type { DialectCapabilities, DialectName, ListenState, NotifyHandler, StoreDialect } from './dialects/types.js'
import { migrateToLatestOrThrow } from './migrations/migrate.js'
import { createRepositories, type Repositories } from './repositories/index.js'
import type { Database } from './schema.js'
import { sqlitePath, storeUrlDialect } from './url.js'

export type { DialectCapabilities, DialectName, ListenState, NotifyHandler, StoreDialect } from './dialects/types.js'
export { defaultStoreUrl, storeFiles, storeServer, storeUrlDialect } from './url.js'
export { isStoreUnavailable } from './dialects/unavailable.js'
export { isUniqueViolation } from './dialects/unique.js'
export { ROLES_CHANGED_CHANNEL, TASK_ENDED_CHANNEL, WORKSPACE_KICK_CHANNEL, WORKSPACE_STOPPED_CHANNEL } from './channels.js'
export type { Database } from './schema.js'
export type { Repositories } from './repositories/index.js'
export type { Org } from './repositories/orgs.js'
export { normalizeEmail, type User } from './repositories/users.js'
export type { GuardedChange, Membership } from './repositories/memberships.js'
export type { ApiKey } from './repositories/api-keys.js'
export type {
  AuditPageQuery, AuditStatsQuery, AuditStatsRow, AuditWhere, NumericPath, QuarantineInsert, QuarantinedEvent, StatsDimension,
} from './repositories/audit.js'
export { AUDIT_INT_COLUMNS, AUDIT_JSON_COLUMNS, AUDIT_ROW_COLUMNS, AUDIT_TEXT_COLUMNS, epochMs, isUuid } from './repositories/audit-columns.js'
export { AppendConflictError, LEAF_COLUMNS, QUEUE_COLUMNS, type AuditLogRepository, type LogLeaf, type LogTree, type PendingRow, type QueuedRow, type QueueVisitor, type StoredCheckpoint } from './audit-log.js'
export { LEAF_READ_COLUMNS, openLeafReader, type LeafReader, type LeafVisitor } from './audit-leaf-reader.js'
export type { CredentialMeta, ProxyTablesRepo, SecretMeta, WorkspaceRow } from './proxy-tables.js'
export type { OAuthClientRow, OAuthStateRow, OAuthTablesRepo, RefreshedTokens } from './oauth-tables.js'
export { auditSinkCursors, type AuditSinkCursors, type ExportPosition, type ExportedRow, type SinkCursor } from './audit-sinks.js'
export { budgetLedgers, type BudgetLedgers, type LedgerKey, type LedgerSnapshot } from './budget-ledgers.js'
export { workspaceLogs, type LogChunk, type LogRead, type WorkspaceLogs } from './workspace-logs.js'
export { UidRangeExhaustedError, workspaceUids, type UidRange, type WorkspaceUids } from './workspace-uids.js'
export { concurrencyPermits, replicaLeases, type ConcurrencyPermits, type LeaseResult, type LiveReplica, type ReplicaInfo, type ReplicaLeases } from './replica-leases.js'
export type { Provider, ProviderPatch } from './repositories/providers.js'
export type { PackRecord, PackPatch } from './repositories/packs.js'
export type {
  RoleConfig, TaskOptions, TaskRecord, TaskStatus, WorkspaceFilter, WorkspaceRecord, WorkspacesRepository,
} from './repositories/workspaces.js'
export type { AgentRole, AgentRoleFields, AgentRolePatch } from './repositories/agent-roles.js'
// The resources' vocabularies are the contract's; re-exported so a part that reads rows names them from the store it reads.
export {
  DESIRED_STATES, ENVIRONMENTS, MEMBERSHIP_ROLES, PACK_ORIGINS, PACK_TIERS, PACK_VISIBILITIES, PERMISSION_SETS, POOL_POLICIES, POSTURES,
  PROVIDER_KINDS, TASK_STATUSES, TERMINAL_TASK_STATUSES, THINKING_EFFORTS, WORKSPACE_STATES, type DesiredState, type Environment,
  type MembershipRole, type MembershipStatus, type PackOrigin, type PackTier, type PackVisibility, type PermissionSet, type PoolPolicy,
  type Posture, type ProviderKind, type ThinkingEffort, type WorkspaceState,
} from '../contract/index.js'

/** Repositories bound to one transaction, plus a notify that fires only after it commits. */
export type StoreTransaction = Repositories & {
  readonly db: Kysely<Database>
  notify(channel: string, payload: string): void
}

export type Store = Repositories & {
  readonly dialect: DialectName
  readonly capabilities: DialectCapabilities
  /** The raw Kysely handle, for repositories added by other parts (src/store only). */
  readonly db: Kysely<Database>
  /** Resolves when the database answers (readiness). */
  ping(): Promise<void>
  close(): Promise<void>
  /** Announces `payload` to every listener of `channel` (every process on Postgres). */
  notify(channel: string, payload: string): Promise<void>
  listen(channel: string, handler: NotifyHandler): Promise<() => Promise<void>>
  /** `cb('lost')` when notifications may be missed from now on (LISTEN dropped), `cb('restored')` when it is back; returns unsubscribe. */
  onListenGap(cb: (state: ListenState) => void): () => void
  /** Runs `fn` in one transaction; notifications queued on it are sent only after commit. */
  transaction<T>(fn: (tx: StoreTransaction) => Promise<T>): Promise<T>
  /**
   * A lock across every process on this database (a Postgres session advisory lock), held until
   * the returned function releases it or the process dies; null when another process holds it in
   * a conflicting mode. SQLite (one process) always grants it. `onLost` is called once when the
   * lock's connection drops without a release (Postgres): the lock is gone and must be taken again.
   */
  holdLock(name: string, mode: 'exclusive' | 'shared', onLost?: (err?: Error) => void): Promise<(() => Promise<void>) | null>
}

export interface OpenStoreOptions {
  /** Postgres only: keep every table in this schema (created when missing). */
  schema?: string
  /** Postgres only: pool size (default 10). */
  poolSize?: number
  /**
   * Another connection of a process that opened (and migrated) the store already, such as the
   * audit log appender's thread: no migration and no planner upkeep, neither of which may wait
   * for (or hold) the write lock while the audit writer needs it.
   */
  secondary?: boolean
}

/**
 * Opens `sqlite:<path>` (parent directories created; `sqlite::memory:` for throwaway stores) or
 * `postgres://…` / `postgresql://…`, and migrates it to the latest schema.
 */
export async function openStore(url: string, opts: OpenStoreOptions = {}): Promise<Store> {
  const dialect = await openDialect(url, opts)
  if (opts.secondary) return storeOver(dialect)
  try {
    await migrateToLatestOrThrow(dialect.db as Kysely<unknown>, dialect.name, dialect.name === 'postgres' ? opts.schema : undefined)
  } catch (err) {
    await dialect.close().catch(() => {})
    throw err
  }
  return storeOver(dialect)
}

async function openDialect(url: string, opts: OpenStoreOptions): Promise<StoreDialect> {
  const kind = storeUrlDialect(url)
  if (kind === 'sqlite') {
    const path = sqlitePath(url)
    if (!path) throw new Error('store URL sqlite: needs a path, e.g. sqlite:./.corral/corral.db')
    // Each dialect's driver is loaded only when a store of its kind is opened (pg is not needed on SQLite).
    const { openSqlite } = await import('./dialects/sqlite.js')
    return openSqlite(path, { secondary: opts.secondary === true })
  }
  if (kind === 'postgres') {
    const { openPostgres } = await import('./dialects/postgres.js')
    return openPostgres(url, { schema: opts.schema, max: opts.poolSize })
  }
  throw new Error(`unsupported store URL (expected sqlite:<path> or postgres://…): ${url.replace(/\/\/[^@/]*@/, '//***@')}`)
}

/**
 * A notification handler's fault stays its own: reported, never thrown into the LISTEN
 * connection's event (where it would take the process down) nor past the channel's other handlers.
 */
function guarded(channel: string, handler: NotifyHandler, lastFault: Map<string, number>): NotifyHandler {
  const report = (err: unknown) => {
    const now = Date.now()
    // One warning per channel and store every 5 s: a handler failing on every notification must not flood stderr.
    if (now - (lastFault.get(channel) ?? 0) < 5_000) return
    lastFault.set(channel, now)
    process.emitWarning(`a handler of the ${channel} notification failed: ${(err as Error)?.message ?? String(err)}`, { code: 'CORRAL_NOTIFY_HANDLER' })
  }
  return (payload) => {
    try {
      const out = handler(payload) as unknown
      if (out instanceof Promise) out.catch(report)
    } catch (err) {
      report(err)
    }
  }
}

function storeOver(dialect: StoreDialect): Store {
  const { db } = dialect
  let closed: Promise<void> | undefined
  const lastHandlerFault = new Map<string, number>()
  return {
    ...createRepositories({ db, dialect }),
    dialect: dialect.name,
    capabilities: dialect.capabilities,
    db,
    async ping() {
      await db.selectFrom('settings').select('key').limit(1).execute()
    },
    close() {
      closed ??= dialect.close()
      return closed
    },
    notify: (channel, payload) => dialect.notify(channel, payload),
    listen: (channel, handler) => dialect.listen(channel, guarded(channel, handler, lastHandlerFault)),
    onListenGap: (cb) => dialect.onListenGap?.(cb) ?? (() => {}),
    holdLock: async (name, mode, onLost) => (dialect.holdLock ? dialect.holdLock(name, mode, onLost) : async () => {}),
    async transaction(fn) {
      const pending: Array<[string, string]> = []
      const result = await db.transaction().execute((trx) =>
        fn({ ...createRepositories({ db: trx, dialect }), db: trx, notify: (c, p) => void pending.push([c, p]) }),
      )
      for (const [channel, payload] of pending) await dialect.notify(channel, payload)
      return result
    },
  }
}
