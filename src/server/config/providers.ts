// The provider service behind /v1/providers (spec "Agent roles and providers", "States and
// transitions"): endpoint checks, unique names, the archive cascade to the roles and its guard on
// running workspaces, the audit events and the respawn of idle workspaces. Delete is refused while
// any role references the provider (`provider_in_use`). Decisions the spec leaves open are in
// docs/roles.md.
import { type EventType, apiError, notFound } from '../../contract/index.js'
import type { Provider, ProviderKind, ProviderPatch } from '../../store/index.js'
import { duplicateName, fieldError } from '../validation.js'
import { type ConfigCaller, type ConfigDeps, type RecordConfig, configMutation, restartIdleWorkspaces } from './events.js'

const LABEL_FIELDS = new Set(['display_name', 'description', 'name'])
const HOSTNAME_RE = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/

export interface ProviderCreate {
  name: string
  display_name?: string
  description?: string
  kind: ProviderKind
  domain?: string
  base_url?: string
  default_model?: string
}

export async function createProvider(deps: ConfigDeps, caller: ConfigCaller, body: ProviderCreate): Promise<Provider> {
  const { domain, base_url } = resolveEndpoint(body.domain, body.base_url ?? null, false)
  await assertNameFree(deps, caller.orgId, body.name)
  return configMutation(deps, caller, async (tx, record) => {
    const provider = await tx.providers.create(caller.orgId, { ...body, domain, base_url, created_by: caller.userId })
    recordProvider(record, 'provider_created', provider)
    return provider
  }).catch(duplicateName(body.name))
}

/** One by exact name (archived only when asked), or the org's list. */
export async function listProviders(deps: ConfigDeps, orgId: string, query: { includeArchived: boolean; name?: string }): Promise<Provider[]> {
  if (query.name !== undefined) {
    const one = await deps.store.providers.getByName(orgId, query.name)
    return one && (query.includeArchived || !one.archived_at) ? [one] : []
  }
  return deps.store.providers.list(orgId, { includeArchived: query.includeArchived })
}

export async function getProvider(deps: ConfigDeps, orgId: string, id: string): Promise<Provider> {
  return (await deps.store.providers.get(orgId, id)) ?? throwNotFound()
}

export async function updateProvider(deps: ConfigDeps, caller: ConfigCaller, id: string, body: ProviderPatch): Promise<Provider> {
  const { store } = deps
  const orgId = caller.orgId
  const current = (await store.providers.get(orgId, id)) ?? throwNotFound()
  if (current.archived_at) throw apiError('provider_archived', `provider ${current.name} is archived; unarchive it first`)
  const patch: ProviderPatch = { ...body }
  if (body.domain !== undefined || body.base_url !== undefined) {
    // A new base URL alone moves the domain with it; an explicit domain must agree with the URL.
    const baseUrl = body.base_url === undefined ? (current.base_url ?? null) : body.base_url
    const domain = body.domain ?? (body.base_url ? undefined : current.domain)
    const resolved = resolveEndpoint(domain, baseUrl, true)
    patch.domain = resolved.domain
    if (body.base_url !== undefined) patch.base_url = resolved.base_url
  }
  if (body.name !== undefined && body.name !== current.name) await assertNameFree(deps, orgId, body.name)
  const provider = await configMutation(deps, caller, async (tx, record) => {
    const provider = (await tx.providers.update(orgId, current.id, patch)) ?? throwNotFound()
    recordProvider(record, 'provider_updated', provider, { patched_fields: Object.keys(body).sort() })
    return provider
  }).catch(duplicateName(body.name ?? ''))
  // Roles read the provider's endpoint and default model at provisioning: respawn idle workspaces
  // (labels do not reach the agent).
  if (Object.keys(body).some((k) => !LABEL_FIELDS.has(k))) {
    await restartIdleWorkspaces(deps, caller, (await store.agentRoles.list(orgId, { providerId: provider.id })).map((r) => r.id))
  }
  return provider
}

export async function deleteProvider(deps: ConfigDeps, caller: ConfigCaller, id: string): Promise<void> {
  const { store } = deps
  const current = (await store.providers.get(caller.orgId, id)) ?? throwNotFound()
  const roleIds = await store.agentRoles.idsByProvider(caller.orgId, current.id)
  if (roleIds.length > 0) {
    throw apiError('provider_in_use', `provider ${current.name} is referenced by ${roleIds.length} agent role(s); delete them or archive the provider`, { roles: roleIds.length })
  }
  await configMutation(deps, caller, async (tx, record) => {
    const deleted = (await tx.providers.delete(caller.orgId, current.id)) ?? throwNotFound()
    recordProvider(record, 'provider_deleted', deleted)
  })
}

/** Archives the provider and every role that references it; returns how many roles the cascade archived. */
export async function archiveProvider(deps: ConfigDeps, caller: ConfigCaller, id: string): Promise<number> {
  const { store } = deps
  const orgId = caller.orgId
  const current = (await store.providers.get(orgId, id)) ?? throwNotFound()
  // Already archived: nothing changes, so no event (docs/roles.md).
  if (current.archived_at) return 0
  // Archived roles count too: their workspaces may still run.
  const roleIds = await store.agentRoles.idsByProvider(orgId, current.id)
  const active = roleIds.length > 0 && deps.workspaceControl ? await deps.workspaceControl.activeCount(orgId, roleIds) : 0
  if (active > 0) {
    throw apiError('workspaces_active', `${active} workspace(s) using a role of provider ${current.name} still run; stop them first (corral role stop-workspaces)`, { active_workspaces: active })
  }
  // The row lock orders this against role creates and unarchives on the same provider.
  return configMutation(deps, caller, async (tx, record) => {
    const locked = await tx.providers.getForUse(orgId, current.id)
    if (!locked || locked.archived_at) return 0 // a concurrent archive won
    await tx.providers.setArchived(orgId, current.id, true)
    const cascaded = await tx.agentRoles.archiveByProvider(orgId, current.id)
    recordProvider(record, 'provider_archived', current, { cascaded_roles: cascaded })
    return cascaded
  })
}

export async function unarchiveProvider(deps: ConfigDeps, caller: ConfigCaller, id: string): Promise<void> {
  const current = (await deps.store.providers.get(caller.orgId, id)) ?? throwNotFound()
  if (!current.archived_at) throw apiError('not_archived', `provider ${current.name} is not archived`)
  // Only the provider: roles archived by the cascade stay archived (spec).
  await configMutation(deps, caller, async (tx, record) => {
    await tx.providers.setArchived(caller.orgId, current.id, false)
    recordProvider(record, 'provider_unarchived', current)
  })
}

function throwNotFound(): never {
  throw notFound('provider')
}

/**
 * domain and base_url agree: the domain is derived from the URL when omitted; the URL is https
 * (the proxy reaches providers over TLS only); a domain alone is a bare hostname.
 */
function resolveEndpoint(domain: string | undefined, baseUrl: string | null, patching: boolean): { domain: string; base_url: string | null } {
  let urlHost: string | undefined
  if (baseUrl !== null) {
    let url: URL
    try {
      url = new URL(baseUrl)
    } catch {
      throw fieldError('base_url', 'must be an absolute https URL')
    }
    if (url.protocol !== 'https:') throw fieldError('base_url', 'must use https')
    if (url.username || url.password) throw fieldError('base_url', 'must not carry credentials (use a credential and an auth transform)')
    if (url.search || url.hash) throw fieldError('base_url', 'must not have a query or fragment')
    urlHost = url.hostname.replace(/^\[|\]$/g, '')
    baseUrl = url.href.replace(/\/$/, '')
  }
  const host = (domain ?? urlHost)?.toLowerCase()
  if (host === undefined) throw fieldError(patching ? 'base_url' : 'domain', 'domain is required when base_url is absent')
  if (!HOSTNAME_RE.test(host)) throw fieldError('domain', 'must be a hostname (no scheme, port or path)')
  if (urlHost !== undefined && urlHost.toLowerCase() !== host) throw fieldError('base_url', `host ${urlHost} differs from domain ${host}`)
  return { domain: host, base_url: baseUrl }
}

async function assertNameFree(deps: ConfigDeps, orgId: string, name: string): Promise<void> {
  if (await deps.store.providers.getByName(orgId, name)) throw apiError('conflict', `a provider named ${name} already exists`, { fields: { name: 'already exists' } })
}

function recordProvider(record: RecordConfig, type: EventType, provider: Provider, extra: Record<string, unknown> = {}): void {
  const detail: Record<string, unknown> = { resource_id: provider.id, name: provider.name }
  if (type === 'provider_created' || type === 'provider_updated') {
    Object.assign(detail, { display_name: provider.display_name ?? '', kind: provider.kind ?? '', domain: provider.domain ?? '' })
  }
  record(type, { ...detail, ...extra })
}
