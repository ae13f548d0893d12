// Typed calls for /v1/providers and /v1/agent-roles over the shared CorralClient, plus name-or-id
// resolution for the CLI (`corral role show coder` and `corral role show role_…` both work).
import { ID_PREFIXES, type AgentRoleJson, type ProviderJson, type ProviderKind, type RoleWarningJson } from '../contract/index.js'
import type { CorralClient } from './client.js'
import { ApiError } from './errors.js'

export type ProviderRecord = ProviderJson

export interface ProviderInput {
  name?: string
  display_name?: string | null
  description?: string | null
  kind?: ProviderKind
  domain?: string
  base_url?: string | null
  default_model?: string | null
}

/** `warnings` on create and update only: credentials and secrets the policy names that the org lacks (docs/roles.md). */
export type AgentRoleRecord = AgentRoleJson

export type RoleWarning = RoleWarningJson

/** The writable role fields (the API's POST and PATCH bodies). */
export type AgentRoleInput = Partial<Omit<AgentRoleRecord, 'id' | 'org_id' | 'created_by' | 'created_at' | 'updated_at' | 'archived_at' | 'warnings'>>

const ID_PREFIX = { provider: `${ID_PREFIXES.provider}_`, role: `${ID_PREFIXES.agentRole}_` } as const
const seg = encodeURIComponent

export function rolesApi(client: CorralClient) {
  const notFound = (what: string, ref: string) =>
    new ApiError(404, { code: 'not_found', message: `no ${what} named ${ref} in this organisation (archived ones included)` })

  return {
    listProviders: async (opts: { includeArchived?: boolean } = {}) =>
      (await client.request<{ providers: ProviderRecord[] }>('GET', '/providers', { query: { include_archived: opts.includeArchived ? 'true' : undefined } })).providers,
    getProvider: (id: string) => client.request<ProviderRecord>('GET', `/providers/${seg(id)}`),
    createProvider: (body: ProviderInput) => client.request<ProviderRecord>('POST', '/providers', { body }),
    updateProvider: (id: string, body: ProviderInput) => client.request<ProviderRecord>('PATCH', `/providers/${seg(id)}`, { body }),
    deleteProvider: (id: string) => client.request<{ status: 'deleted' }>('DELETE', `/providers/${seg(id)}`),
    archiveProvider: (id: string) => client.request<{ status: 'archived'; cascaded_roles: number }>('POST', `/providers/${seg(id)}/archive`),
    unarchiveProvider: (id: string) => client.request<{ status: 'unarchived' }>('POST', `/providers/${seg(id)}/unarchive`),
    /** A `prov_…` id as is, else the provider with that name (archived included). */
    async resolveProvider(ref: string): Promise<ProviderRecord> {
      if (ref.startsWith(ID_PREFIX.provider)) return this.getProvider(ref)
      const { providers } = await client.request<{ providers: ProviderRecord[] }>('GET', '/providers', { query: { name: ref, include_archived: 'true' } })
      if (!providers[0]) throw notFound('provider', ref)
      return providers[0]
    },

    listRoles: async (opts: { includeArchived?: boolean; providerId?: string } = {}) =>
      (await client.request<{ agent_roles: AgentRoleRecord[] }>('GET', '/agent-roles', {
        query: { include_archived: opts.includeArchived ? 'true' : undefined, provider_id: opts.providerId },
      })).agent_roles,
    getRole: (id: string) => client.request<AgentRoleRecord>('GET', `/agent-roles/${seg(id)}`),
    createRole: (body: AgentRoleInput) => client.request<AgentRoleRecord>('POST', '/agent-roles', { body }),
    updateRole: (id: string, body: AgentRoleInput) => client.request<AgentRoleRecord>('PATCH', `/agent-roles/${seg(id)}`, { body }),
    deleteRole: (id: string) => client.request<{ status: 'deleted' }>('DELETE', `/agent-roles/${seg(id)}`),
    archiveRole: (id: string) => client.request<{ status: 'archived' }>('POST', `/agent-roles/${seg(id)}/archive`),
    unarchiveRole: (id: string) => client.request<{ status: 'unarchived' }>('POST', `/agent-roles/${seg(id)}/unarchive`),
    stopRoleWorkspaces: (id: string) => client.request<{ stopping: number }>('POST', `/agent-roles/${seg(id)}/stop-workspaces`),
    /** The credentials and secrets a caps.yaml names that the org lacks (what a role save would warn about). */
    checkCapabilities: async (capabilities: string) =>
      (await client.request<{ warnings: RoleWarning[] }>('POST', '/agent-roles/check', { body: { capabilities } })).warnings,
    /** A `role_…` id as is, else the role with that name (archived included). */
    async resolveRole(ref: string): Promise<AgentRoleRecord> {
      if (ref.startsWith(ID_PREFIX.role)) return this.getRole(ref)
      const { agent_roles } = await client.request<{ agent_roles: AgentRoleRecord[] }>('GET', '/agent-roles', { query: { name: ref, include_archived: 'true' } })
      if (!agent_roles[0]) throw notFound('agent role', ref)
      return agent_roles[0]
    },
  }
}
export type RolesApi = ReturnType<typeof rolesApi>
