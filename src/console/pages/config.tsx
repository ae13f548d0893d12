// What workspaces are made from: model providers and agent roles (packs: packs.tsx). Reads: any
// member; writes: caps:write. A role's caps.yaml is edited on the Policies page; here its other
// fields (provider, model, environment, timeouts, agent knobs, warm pool, packs).
import type { ReactNode } from 'react'
import { AGENT_KINDS, ENVIRONMENTS, PROVIDER_KINDS, THINKING_EFFORTS } from '../../contract/resources.js'
import { seg } from '../api.js'
import { changedValues, filledValues, type Field, type Values } from '../form.js'
import { ResourceList } from '../resource.js'
import { href } from '../router.js'
import { useSession } from '../session.js'
import { useLoad, when } from '../ui.js'
import type { AgentRoleRecord } from '../wire.js'

interface Provider {
  id: string
  name: string
  kind: string
  display_name?: string
  description?: string
  base_url?: string
  default_model?: string
  created_at: string
  archived_at?: string
}

interface RoleWarning {
  code: string
  name: string
  message: string
}

const archived = (r: { archived_at?: string }) => (r.archived_at ? `archived ${when(r.archived_at)}` : 'active')
const str = (v: unknown): string => (v === undefined || v === null ? '' : String(v))

const PROVIDER_FIELDS: readonly Field[] = [
  { name: 'name', label: 'Name', required: true },
  { name: 'kind', label: 'Kind', type: 'select', options: [...PROVIDER_KINDS], required: true },
  { name: 'display_name', label: 'Display name' },
  { name: 'description', label: 'Description' },
  { name: 'base_url', label: 'Base URL (https)', type: 'url' },
  { name: 'default_model', label: 'Default model' },
]

export function ProvidersPage(): ReactNode {
  const { api, holds } = useSession()
  const write = holds('caps:write')
  return (
    <ResourceList<Provider>
      title="Providers"
      load={async (signal) => (await api.get<{ providers: Provider[] }>('/providers', { include_archived: 'true' }, signal)).providers}
      rowKey={(p) => p.id}
      columns={[
        { label: 'Name', render: (p) => p.name },
        { label: 'Kind', render: (p) => p.kind },
        { label: 'Base URL', render: (p) => <code>{p.base_url}</code> },
        { label: 'Default model', render: (p) => p.default_model },
        { label: 'Id', render: (p) => <code>{p.id}</code> },
        { label: 'State', render: archived },
      ]}
      actions={
        write
          ? [
              { label: () => 'Archive', when: (p) => !p.archived_at, run: (p) => api.post(`/providers/${seg(p.id)}/archive`) },
              { label: () => 'Unarchive', when: (p) => Boolean(p.archived_at), run: (p) => api.post(`/providers/${seg(p.id)}/unarchive`) },
              { label: () => 'Delete', danger: true, run: (p) => api.del(`/providers/${seg(p.id)}`) },
            ]
          : []
      }
      edit={
        write
          ? {
              name: (p) => p.name,
              when: (p) => !p.archived_at,
              fields: PROVIDER_FIELDS,
              initial: (p) => Object.fromEntries(PROVIDER_FIELDS.map((f) => [f.name, str(p[f.name as keyof Provider])])),
              submit: async (p, initial, values) => void (await patchChanged(PROVIDER_FIELDS, initial, values, (body) => api.patch(`/providers/${seg(p.id)}`, body))),
            }
          : undefined
      }
      create={write ? { title: 'Create provider', fields: PROVIDER_FIELDS, submit: async (v) => void (await api.post('/providers', filledValues(PROVIDER_FIELDS, v))) } : undefined}
    />
  )
}

/** PATCHes what changed (a save with no change is refused here, as the API would). */
async function patchChanged<R>(fields: readonly Field[], initial: Values, values: Values, patch: (body: Record<string, unknown>) => Promise<R>): Promise<R> {
  const body = changedValues(fields, initial, values)
  if (Object.keys(body).length === 0) throw new Error('nothing changed')
  return patch(body)
}

function roleFields(providers: readonly Provider[], packs: readonly { id: string; name: string; version: string }[]): Field[] {
  const n = (name: string, label: string): Field => ({ name, label, type: 'number' })
  return [
    { name: 'display_name', label: 'Display name' },
    { name: 'description', label: 'Description' },
    { name: 'provider_id', label: 'Provider', type: 'select', required: true, options: providers.filter((p) => !p.archived_at).map((p) => ({ value: p.id, label: p.name })) },
    { name: 'model', label: 'Model (empty: the provider default)' },
    { name: 'agent_kind', label: 'Agent (empty: corral, or a pack\'s agent)', type: 'select', options: [...AGENT_KINDS] },
    { name: 'environment', label: 'Environment', type: 'select', options: [...ENVIRONMENTS] },
    { name: 'environment_description', label: 'Environment description' },
    n('task_timeout_seconds', 'Task timeout (s)'),
    n('idle_timeout_seconds', 'Idle timeout (s)'),
    { name: 'thinking_effort', label: 'Thinking effort', type: 'select', options: [...THINKING_EFFORTS] },
    n('max_continuations', 'Max continuations'),
    n('max_context_tokens', 'Max context tokens'),
    { name: 'pool_policy', label: 'Warm pool', type: 'select', emptyIsValue: true, options: ['static', 'dynamic'] },
    n('pool_size', 'Pool size'),
    n('pool_max_size', 'Pool max size'),
    { name: 'pack_ids', label: 'Packs', type: 'multiselect', options: packs.map((p) => ({ value: p.id, label: `${p.name} ${p.version}` })) },
  ]
}

/** The warnings of a role save (credentials or secrets its policy names that the org lacks). */
function saved(role: { name: string; warnings?: RoleWarning[] }): ReactNode {
  if (!role.warnings?.length) return `Saved ${role.name}.`
  return (
    <>
      Saved {role.name}, with warnings:
      <ul>
        {role.warnings.map((w) => (
          <li key={`${w.code}-${w.name}`}>
            <code>{w.code}</code> {w.message}
          </li>
        ))}
      </ul>
    </>
  )
}

export function RolesPage(): ReactNode {
  const { api, holds } = useSession()
  const write = holds('caps:write')
  const choices = useLoad(
    async (signal) => {
      const [providers, packs] = await Promise.all([
        api.get<{ providers: Provider[] }>('/providers', {}, signal),
        api.get<{ packs: { id: string; name: string; version: string }[] }>('/packs', {}, signal),
      ])
      return roleFields(providers.providers, packs.packs)
    },
    [],
  )
  const fields = choices.data ?? roleFields([], [])
  const createFields: Field[] = [{ name: 'name', label: 'Name', required: true }, fields.find((f) => f.name === 'provider_id')!, { name: 'model', label: 'Model' }, { name: 'capabilities', label: 'caps.yaml', type: 'textarea' }]
  return (
    <ResourceList<AgentRoleRecord>
      title="Roles"
      load={async (signal) => (await api.get<{ agent_roles: AgentRoleRecord[] }>('/agent-roles', { include_archived: 'true' }, signal)).agent_roles}
      rowKey={(r) => r.id}
      columns={[
        { label: 'Name', render: (r) => r.name },
        { label: 'Environment', render: (r) => r.environment },
        { label: 'Model', render: (r) => r.model ?? '' },
        { label: 'Packs', render: (r) => r.pack_ids.length },
        { label: 'Policy', render: (r) => <a href={href(['policies'], { role: r.id })}>caps.yaml</a> },
        { label: 'State', render: archived },
      ]}
      actions={
        write
          ? [
              { label: () => 'Archive', when: (r) => !r.archived_at, run: (r) => api.post(`/agent-roles/${seg(r.id)}/archive`) },
              { label: () => 'Unarchive', when: (r) => Boolean(r.archived_at), run: (r) => api.post(`/agent-roles/${seg(r.id)}/unarchive`) },
              { label: () => 'Stop its workspaces', when: () => holds('workspace:write'), run: (r) => api.post(`/agent-roles/${seg(r.id)}/stop-workspaces`) },
              { label: () => 'Delete', danger: true, run: (r) => api.del(`/agent-roles/${seg(r.id)}`) },
            ]
          : []
      }
      edit={
        write && choices.data
          ? {
              name: (r) => r.name,
              when: (r) => !r.archived_at,
              fields,
              initial: (r) => Object.fromEntries(fields.map((f) => [f.name, f.type === 'multiselect' ? [...r.pack_ids] : str((r as unknown as Record<string, unknown>)[f.name])])),
              submit: async (r, initial, values) => saved(await patchChanged(fields, initial, values, (body) => api.patch<{ name: string; warnings?: RoleWarning[] }>(`/agent-roles/${seg(r.id)}`, body))),
            }
          : undefined
      }
      create={
        write
          ? {
              title: 'Create role',
              fields: createFields,
              submit: async (v) => saved(await api.post<{ name: string; warnings?: RoleWarning[] }>('/agent-roles', filledValues(createFields, v))),
            }
          : undefined
      }
    />
  )
}
