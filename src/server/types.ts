// What the server is built from (ServerDeps), who is calling (Principal), and what each route
// declares in its `config` (RouteConfig). Other parts' route plugins (proxy: secrets, credentials;
// workspaces) receive the same ServerDeps and declare the same config.
import type { Logger } from 'pino'
import type { AuditBus, AuditWriter } from '../audit/index.js'
import type { Sealer } from '../secrets/index.js'
import type { Org, Store } from '../store/index.js'
import type { Identity } from './identity/index.js'
import type { Grant, Permission, PermissionSet, Requirement, Role } from './permissions.js'
import type { WorkspaceControl } from './workspace-control.js'

export interface ServerConfig {
  /** Per-credential token bucket on /v1; false disables it. */
  rateLimit: { capacity: number; refillPerSecond: number } | false
  /** HMAC secret of the identity provider's webhooks; the webhook routes answer 503 without it. */
  webhookSecret?: string
  /** API-key verification cache TTL (default 60 s). */
  keyCacheTtlMs?: number
  /** Minimum interval between `last_used_at` writes per key (default 60 s). */
  lastUsedThrottleMs?: number
  /** SSE stream tuning; defaults are the audit module's (see docs/api.md). */
  stream?: { heartbeatMs?: number; maxDurationMs?: number }
  /** Largest accepted request body in bytes (default 1 MiB). */
  bodyLimit?: number
}

/** How routes find a workspace and its creator (the workspace part provides it; absent → every id is not found). */
export interface WorkspaceDirectory {
  get(orgId: string, id: string): Promise<{ id: string; created_by: string } | undefined>
}

export interface ServerDeps {
  store: Store
  audit: AuditWriter
  bus: AuditBus
  logger: Logger
  config: ServerConfig
  identity: Identity
  workspaces?: WorkspaceDirectory
  /** The workspace controller, for role/provider routes (absent → no workspaces exist). */
  workspaceControl?: WorkspaceControl
  /**
   * Seals org secrets and credentials (the master key, loaded once by serve and shared with the
   * proxy). Absent → the secrets and credentials routes answer service_unavailable.
   */
  sealer?: Sealer
}

export interface Principal {
  kind: 'api_key' | 'session'
  org: Org
  /** Audit attribution: the user's id for sessions, `system` for API keys (spec Authentication 7). */
  userId: string
  /** Identity for `:own` creator matches: the user's id for sessions, the key's id for API keys. */
  creatorId: string
  permissions: ReadonlySet<Permission>
  role?: Role
  permissionSet?: PermissionSet
  keyId?: string
  email?: string
}

export interface RouteConfig {
  /** Required permissions (see permissions.ts `Requirement`); required on every authenticated route. */
  permission?: Requirement
  /** false: no bearer auth (health, webhooks). */
  auth?: false
  /** Accept the credential from the `api_key` query parameter too (EventSource clients). */
  queryCredential?: boolean
  /** Reachable in every billing posture although it writes (API key revoke). */
  postureExempt?: boolean
}

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null
    /** Per requirement entry, whether the caller holds it unscoped or only as `:own`. */
    grants: Grant[]
  }
  interface FastifyContextConfig extends RouteConfig {}
}
