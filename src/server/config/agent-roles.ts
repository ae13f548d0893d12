// The agent-role service behind /v1/agent-roles (spec "Agent role", "Agent roles and providers",
// "States and transitions"): a role is what a workspace is provisioned from, so every save checks
// its provider (exists, not archived, row-locked), its packs, its pool settings and its policy
// (compiled on every save, so a role never holds a policy that does not compile); then the audit
// event and the respawn of idle workspaces. Decisions the spec leaves open are in docs/roles.md.
import { AGENT_KIND_PROVIDERS, type AgentKind, type EventType, type RoleResources, apiError, notFound, requestOverLimit } from '../../contract/index.js'
import { checkPackIds } from '../../packs/index.js'
import { compilePolicy } from '../../policy/index.js'
import type { AgentRole, AgentRoleFields, AgentRolePatch, StoreTransaction } from '../../store/index.js'
import { duplicateName, fieldError } from '../validation.js'
import { type ConfigCaller, type ConfigDeps, type RecordConfig, configMutation, restartIdleWorkspaces } from './events.js'
import { type MaterialWarning, missingMaterial } from './material-warnings.js'

const LABEL_FIELDS = new Set(['display_name', 'description'])

/** A saved role, with one warning per credential or secret its policy names that the org lacks (material-warnings.ts). */
export type SavedAgentRole = AgentRole & { warnings?: MaterialWarning[] }

export async function createAgentRole(deps: ConfigDeps, caller: ConfigCaller, body: AgentRoleFields): Promise<SavedAgentRole> {
  const orgId = caller.orgId
  checkPool(body)
  checkResources(body.resources)
  checkCapabilities(body.capabilities)
  const role = await configMutation(deps, caller, async (tx, record) => {
    checkAgentProvider(body.agent_kind, await assertProviderUsable(tx, orgId, body.provider_id))
    checkAgentKind(body.agent_kind, await checkPackIds(tx, orgId, body.pack_ids ?? []))
    if (await tx.agentRoles.getByName(orgId, body.name)) throw apiError('conflict', `an agent role named ${body.name} already exists`, { fields: { name: 'already exists' } })
    const role = await tx.agentRoles.create(orgId, { ...body, created_by: caller.userId })
    recordRole(record, 'agent_role_created', role)
    return role
  }).catch(duplicateName(body.name, 'agent role'))
  return withWarnings(deps, role)
}

/** One by exact name (archived only when asked, of the provider when given), or the org's list. */
export async function listAgentRoles(deps: ConfigDeps, orgId: string, query: { includeArchived: boolean; name?: string; providerId?: string }): Promise<AgentRole[]> {
  const { includeArchived, name, providerId } = query
  if (name !== undefined) {
    const one = await deps.store.agentRoles.getByName(orgId, name)
    const keep = one && (includeArchived || !one.archived_at) && (providerId === undefined || one.provider_id === providerId)
    return keep ? [one] : []
  }
  return deps.store.agentRoles.list(orgId, { includeArchived, ...(providerId ? { providerId } : {}) })
}

export async function getAgentRole(deps: ConfigDeps, orgId: string, id: string): Promise<AgentRole> {
  return (await deps.store.agentRoles.get(orgId, id)) ?? throwNotFound()
}

export async function updateAgentRole(deps: ConfigDeps, caller: ConfigCaller, id: string, body: AgentRolePatch): Promise<SavedAgentRole> {
  const orgId = caller.orgId
  if (body.capabilities !== undefined) checkCapabilities(body.capabilities)
  const role = await configMutation(deps, caller, async (tx, record) => {
      const current = (await tx.agentRoles.get(orgId, id)) ?? throwNotFound()
      if (current.archived_at) throw apiError('role_archived', `agent role ${current.name} is archived; unarchive it first`)
      if (body.provider_id !== undefined && body.provider_id !== current.provider_id) await assertProviderUsable(tx, orgId, body.provider_id)
      if (body.provider_id !== undefined || body.agent_kind !== undefined) {
        const provider = await tx.providers.getForUse(orgId, body.provider_id ?? current.provider_id)
        if (provider) checkAgentProvider(body.agent_kind === undefined ? current.agent_kind : body.agent_kind, provider)
      }
      checkPool({ ...current, ...body })
      checkResources(body.resources)
      if (body.pack_ids !== undefined || body.agent_kind !== undefined) {
        checkAgentKind(body.agent_kind === undefined ? current.agent_kind : body.agent_kind, await checkPackIds(tx, orgId, body.pack_ids ?? current.pack_ids))
      }
      if (body.name !== undefined && body.name !== current.name && (await tx.agentRoles.getByName(orgId, body.name))) {
        throw apiError('conflict', `an agent role named ${body.name} already exists`, { fields: { name: 'already exists' } })
      }
      const role = (await tx.agentRoles.update(orgId, current.id, body)) ?? throwNotFound()
      recordRole(record, 'agent_role_updated', role, { patched_fields: Object.keys(body).sort() })
      return role
    }).catch(duplicateName(body.name ?? '', 'agent role'))
  // Labels do not reach the agent; anything else does, so idle workspaces respawn to pick it up.
  if (Object.keys(body).some((k) => !LABEL_FIELDS.has(k))) await restartIdleWorkspaces(deps, caller, [role.id])
  return withWarnings(deps, role)
}

/** The saved role's warnings (its whole policy, not only a patched one), present only when there are some. */
async function withWarnings(deps: ConfigDeps, role: AgentRole): Promise<SavedAgentRole> {
  const warnings = await missingMaterial(deps.store, role.org_id, role.capabilities)
  return warnings.length > 0 ? { ...role, warnings } : role
}

export async function deleteAgentRole(deps: ConfigDeps, caller: ConfigCaller, id: string): Promise<void> {
  const { store } = deps
  const current = (await store.agentRoles.get(caller.orgId, id)) ?? throwNotFound()
  // Workspaces keep their role for their whole life (snapshots, forks, audit names): any row pins it.
  const workspaces = await store.agentRoles.workspaceCount(caller.orgId, current.id)
  if (workspaces > 0) {
    throw apiError('role_in_use', `agent role ${current.name} is used by ${workspaces} workspace(s); archive it instead`, { workspaces })
  }
  await configMutation(deps, caller, async (tx, record) => {
    const deleted = (await tx.agentRoles.delete(caller.orgId, current.id)) ?? throwNotFound()
    recordRole(record, 'agent_role_deleted', deleted)
  })
}

export async function archiveAgentRole(deps: ConfigDeps, caller: ConfigCaller, id: string): Promise<void> {
  const current = (await deps.store.agentRoles.get(caller.orgId, id)) ?? throwNotFound()
  // Already archived: nothing changes, so no second event (docs/roles.md).
  if (current.archived_at) return
  await configMutation(deps, caller, async (tx, record) => {
    await tx.agentRoles.setArchived(caller.orgId, current.id, true)
    recordRole(record, 'agent_role_archived', current)
  })
}

export async function unarchiveAgentRole(deps: ConfigDeps, caller: ConfigCaller, id: string): Promise<void> {
  const orgId = caller.orgId
  await configMutation(deps, caller, async (tx, record) => {
    const role = (await tx.agentRoles.get(orgId, id)) ?? throwNotFound()
    if (!role.archived_at) throw apiError('not_archived', `agent role ${role.name} is not archived`)
    // A role whose provider is archived could not run a task anyway; unarchive the provider first.
    const provider = await tx.providers.getForUse(orgId, role.provider_id)
    if (provider?.archived_at) throw apiError('provider_archived', `provider ${provider.name} is archived; unarchive it first`)
    await tx.agentRoles.setArchived(orgId, role.id, false)
    recordRole(record, 'agent_role_unarchived', role)
  })
}

/** Stops every workspace of the role; returns how many are stopping. */
export async function stopRoleWorkspaces(deps: ConfigDeps, orgId: string, id: string): Promise<number> {
  const role = (await deps.store.agentRoles.get(orgId, id)) ?? throwNotFound()
  return deps.workspaceControl ? deps.workspaceControl.stopForRole(orgId, role.id) : 0
}

function throwNotFound(): never {
  throw notFound('agent role')
}

/** The provider exists in the caller's org (else a field error) and is not archived; locked until the transaction ends. */
async function assertProviderUsable(tx: StoreTransaction, orgId: string, providerId: string): Promise<{ kind?: string; name: string }> {
  const provider = await tx.providers.getForUse(orgId, providerId)
  if (!provider) throw fieldError('provider_id', 'no such provider in this organisation')
  if (provider.archived_at) throw apiError('provider_archived', `provider ${provider.name} is archived`)
  return provider
}

/** An agent kind talks to the providers whose API its CLI speaks (AGENT_KIND_PROVIDERS). */
function checkAgentProvider(kind: AgentKind | null | undefined, provider: { kind?: string; name: string }): void {
  if (!kind) return
  const speaks = AGENT_KIND_PROVIDERS[kind] as readonly string[]
  if (!speaks.includes(provider.kind ?? 'anthropic')) {
    throw fieldError('agent_kind', `${kind} cannot use provider ${provider.name} (kind ${provider.kind ?? 'anthropic'}); it speaks ${speaks.join(', ')}`)
  }
}

/** Pool settings agree: dynamic pools need a ceiling, and the floor never exceeds it. */
function checkPool(r: { pool_policy?: string; pool_size?: number | null; pool_max_size?: number | null }): void {
  if (r.pool_policy === 'dynamic' && (r.pool_max_size ?? 0) < 1) throw fieldError('pool_max_size', 'must be at least 1 when pool_policy is dynamic')
  if (r.pool_size != null && r.pool_max_size != null && r.pool_size > r.pool_max_size) throw fieldError('pool_size', `must not exceed pool_max_size (${r.pool_max_size})`)
}

/**
 * One agent per workspace: a role that names an agent kind cannot also attach a pack that provides
 * the agent (docs/roles.md "Agent kind"); without a kind, the pack's agent runs as before.
 */
function checkAgentKind(kind: AgentKind | null | undefined, agentPack: string | undefined): void {
  if (kind && agentPack !== undefined) throw fieldError('agent_kind', `cannot be set while pack ${agentPack} provides the agent; detach the pack or clear agent_kind`)
}

/** A request above its own limit would make every pod of the role invalid (422 from the API server). */
function checkResources(r: RoleResources | null | undefined): void {
  const over = r ? requestOverLimit(r) : undefined
  if (over) throw fieldError(over.field, over.message)
}

/** Compiles on save (spec): a failing policy is refused with the compiler's diagnostics. */
function checkCapabilities(source: string | null | undefined): void {
  if (source === null || source === undefined) return
  const result = compilePolicy(source)
  if (!result.ok) {
    const errors = result.diagnostics.filter((d) => d.severity === 'error')
    throw apiError('invalid_capabilities', `capabilities do not compile: ${errors.length} error(s), first: ${errors[0]?.message ?? 'unknown'}`, {
      diagnostics: result.diagnostics,
    })
  }
}

function recordRole(record: RecordConfig, type: EventType, role: AgentRole, extra: Record<string, unknown> = {}): void {
  const detail: Record<string, unknown> = { resource_id: role.id, name: role.name }
  if (type === 'agent_role_created' || type === 'agent_role_updated') {
    Object.assign(detail, { display_name: role.display_name ?? '', provider_id: role.provider_id, model: role.model ?? '' })
  }
  record(type, { ...detail, ...extra })
}
