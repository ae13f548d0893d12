// Every repository, registered once. A part that adds tables adds its factory here (one line) and
// its table interface to schema.ts; the Store and its transactions then expose it.
import { createAgentRolesRepository } from './agent-roles.js'
import { createApiKeysRepository } from './api-keys.js'
import { createAuditRepository } from './audit.js'
import type { RepoContext } from './context.js'
import { createMembershipsRepository } from './memberships.js'
import { createOrgsRepository } from './orgs.js'
import { createPacksRepository } from './packs.js'
import { createProvidersRepository } from './providers.js'
import { proxyTables } from '../proxy-tables.js'
import { oauthTables } from '../oauth-tables.js'
import { auditLog } from '../audit-log.js'
import { createSettingsRepository } from './settings.js'
import { createUsersRepository } from './users.js'
import { createWebhookNoncesRepository } from './webhook-nonces.js'
import { createWorkspacesRepository } from './workspaces.js'

export const repositoryFactories = {
  orgs: createOrgsRepository,
  users: createUsersRepository,
  memberships: createMembershipsRepository,
  apiKeys: createApiKeysRepository,
  settings: createSettingsRepository,
  webhookNonces: createWebhookNoncesRepository,
  audit: createAuditRepository,
  providers: createProvidersRepository,
  agentRoles: createAgentRolesRepository,
  packs: createPacksRepository,
  workspaces: createWorkspacesRepository,
  /** The proxy's and secrets' tables (workspace lookup for activation, task liveness, sealed secrets and credentials). */
  proxy: ({ db }: RepoContext) => proxyTables(db),
  /** OAuth credentials' provider configuration, sealed refresh tokens and consent states. */
  oauth: ({ db }: RepoContext) => oauthTables(db),
  /** The provable log: pending rows, leaves, trees, signed checkpoints and their keys. */
  auditLog: ({ db, dialect }: RepoContext) => auditLog(db, dialect),
} satisfies Record<string, (ctx: RepoContext) => object>

export type Repositories = { [K in keyof typeof repositoryFactories]: ReturnType<(typeof repositoryFactories)[K]> }

export function createRepositories(ctx: RepoContext): Repositories {
  const out: Record<string, object> = {}
  for (const [name, factory] of Object.entries(repositoryFactories)) out[name] = factory(ctx)
  return out as Repositories
}
