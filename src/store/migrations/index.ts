// Every migration, in order. Listed explicitly (no folder scan) so the same list works from tsx
// sources and from dist. To add tables: write one file next to these and append one line here.
import { core } from './20261122T100000-core.js'
import { audit } from './20261122T100100-audit.js'
import { proxy } from './20261122T103000-proxy.js'
import { budgetLedgers } from './20261122T104000-budget-ledgers.js'
import { workspacesTasks } from './20261122T111000-workspaces.js'
import { workspacePool } from './20261122T112000-workspace-pool.js'
import { roles } from './20261122T110000-roles.js'
import { packs } from './20261122T120000-packs.js'
import { auditHardening } from './20261126T010000-audit-hardening.js'
import { credentialOwner } from './20261126T071000-creds-credential-owner.js'
import { oauthCredentials } from './20261126T071500-oauth-oauth-credentials.js'
import { replicasLeases } from './20261126T071500-replicas-leases.js'
import { workspaceLogs } from './20261126T103000-cli-workspace-logs.js'
import { replicasPools } from './20261126T104500-replicas-pools.js'
import { k8sRoleResources } from './20261126T112800-k8s-role-resources.js'
import { runtimeWorkspaceUids } from './20261129T020000-runtime-workspace-uids.js'
import { oauthBindingLease } from './20261129T024500-oauth-binding-lease.js'
import { agentsRoleAgentKind } from './20261129T053000-agents-role-agent-kind.js'
import { auditMerkle } from './20261129T060000-audit-merkle.js'
import type { StoreMigration } from './types.js'

export type { StoreMigration } from './types.js'

export const migrations: readonly StoreMigration[] = [
  core,
  audit,
  proxy,
  budgetLedgers,
  roles,
  workspacesTasks,
  workspacePool,
  packs,
  auditHardening,
  credentialOwner,
  oauthCredentials,
  replicasLeases,
  workspaceLogs,
  replicasPools,
  k8sRoleResources,
  runtimeWorkspaceUids,
  oauthBindingLease,
  agentsRoleAgentKind,
  auditMerkle,
]
