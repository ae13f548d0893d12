// What the server is built from (ServerDeps), who is calling (Principal), and what each route
// declares in its `config` (RouteConfig). `serve` (src/serve/) builds every part first and hands
// buildApp a complete ServerDeps; a part this server does not run is an explicit value
// (`lifecycle: { available: false, reason }`, `packContent: null`), never a field filled in later.
import type { Logger } from 'pino'
import type { AuditBus, AuditWriter, ProvableLog } from '../audit/index.js'
import type { OAuthHttp, Sealer } from '../secrets/index.js'
import type { PackContent, RegistrySettings } from '../packs/index.js'
import type { WorkspaceService } from '../workspaces/index.js'
import type { Org, Store } from '../store/index.js'
import type { CredentialType } from '../contract/index.js'
import type { Identity } from './identity/index.js'
import type { Grant, Permission, PermissionSet, Requirement, Role } from './permissions.js'
import type { WorkspaceControl } from './workspace-control.js'
import type { ApiLimits } from './limits.js'

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
  /** The API port's connection limits (src/server/limits.ts; defaults when absent). */
  limits?: ApiLimits
  /** Per-org bucket on task create and follow-up; false disables it (default 30 tasks, refilling one per 2 s). */
  taskRateLimit?: { capacity: number; refillPerSecond: number } | false
}

/** How routes find a workspace and its creator (the workspace part provides it; `NO_WORKSPACES` finds none). */
export interface WorkspaceDirectory {
  get(orgId: string, id: string): Promise<{ id: string; created_by: string } | undefined>
}

/** What the API hands out about the proxy (serve wires it; absent: those routes answer service_unavailable). */
export interface ProxyAccess {
  /** The proxy CA's certificate (PEM) and its SHA-256 fingerprint; never the key. */
  caPem: string
  caFingerprint: string
  /** Mints capability tokens (src/secrets/ CapabilityTokens). */
  tokens: { mint(subject: { org_id: string; workspace_id: string; task_id?: string }, ttlSeconds: number): Promise<{ token: string; expires_at: string }> }
}

export interface ServerDeps {
  store: Store
  audit: AuditWriter
  bus: AuditBus
  /** The provable log (signed checkpoints on demand); absent → POST /v1/audit/checkpoints answers service_unavailable. */
  auditLog?: ProvableLog
  logger: Logger
  config: ServerConfig
  identity: Identity
  workspaces: WorkspaceDirectory
  /** The workspace controller, for role/provider routes (`NO_WORKSPACE_CONTROL`: no workspaces exist). */
  workspaceControl: WorkspaceControl
  /** The workspace lifecycle the workspace and task routes drive. */
  lifecycle: WorkspaceLifecycle
  /** Extracted pack trees by digest (the workspace controller mounts them); null → pack uploads answer 503. */
  packContent: PackContent | null
  /** Where pack images are pushed and pulled (CORRAL_PACK_REGISTRY and friends, docs/packs.md "Registry"). */
  packRegistry: RegistrySettings
  /** Seals org secrets and credentials (the master key, loaded once by serve and shared with the proxy); null → the secrets and credentials routes answer service_unavailable. */
  sealer: Sealer | null
  /** The proxy's CA and token minting, for GET /v1/proxy/ca and POST /v1/workspaces/{id}/proxy-token. */
  proxyAccess?: ProxyAccess
  /** True from SIGTERM on (serve's drain): /readyz answers 503 so load balancers stop routing here. */
  draining?: () => boolean
  /**
   * OAuth consent (docs/credentials.md "OAuth credentials"): the public base URL browsers reach this
   * server at (the callback is `<publicUrl>/v1/oauth/callback`; unset → `oauth/start` answers
   * oauth_unavailable) and the HTTP client for the providers. Absent: no public URL, system roots.
   */
  oauth?: { publicUrl: string | undefined; http: OAuthHttp }
}

/**
 * Whether workspaces can run here. Unavailable with a controller: its runtime cannot run on this
 * host, so reads work and starting work answers `service_unavailable` with `reason`. Unavailable
 * without one: this server runs no workspace lifecycle (an API-only app), every workspace route
 * answers `service_unavailable`.
 */
export type WorkspaceLifecycle =
  | { readonly available: true; readonly controller: WorkspaceService }
  | { readonly available: false; readonly reason: string; readonly controller: WorkspaceService | null }

export interface Principal {
  kind: CredentialType
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
