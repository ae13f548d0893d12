// What workspaces are made from: model providers, agent roles and content packs. Reads: any member;
// writes: caps:write. A role's caps.yaml is edited on the Policies page.
import type { ReactNode } from 'react'
import { seg } from '../api.js'
import { ResourceList } from '../resource.js'
import { href } from '../router.js'
import { useSession } from '../session.js'
import { when } from '../ui.js'
import type { AgentRoleRecord } from '../wire.js'

interface Provider {
  id: string
  name: string
  kind: string
  base_url?: string
  default_model?: string
  created_at: string
  archived_at?: string
}

interface Pack {
  id: string
  name: string
  version: string
  tier: string
  visibility: string
  owned?: boolean
  image_digest?: string
  created_at?: string
}

const archived = (r: { archived_at?: string }) => (r.archived_at ? `archived ${when(r.archived_at)}` : 'active')

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
      create={
        write
          ? {
              title: 'Create provider',
              fields: [
                { name: 'name', label: 'Name', required: true },
                { name: 'kind', label: 'Kind', type: 'select', options: ['anthropic', 'openai'], required: true },
                { name: 'base_url', label: 'Base URL', type: 'url' },
                { name: 'default_model', label: 'Default model' },
              ],
              submit: async (v) => void (await api.post('/providers', Object.fromEntries(Object.entries(v).filter(([, x]) => x !== '')))),
            }
          : undefined
      }
    />
  )
}

export function RolesPage(): ReactNode {
  const { api, holds } = useSession()
  const write = holds('caps:write')
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
      create={
        write
          ? {
              title: 'Create role',
              fields: [
                { name: 'name', label: 'Name', required: true },
                { name: 'provider_id', label: 'Provider id (prov_…)', required: true },
                { name: 'capabilities', label: 'caps.yaml', type: 'textarea' },
              ],
              submit: async (v) => void (await api.post('/agent-roles', Object.fromEntries(Object.entries(v).filter(([, x]) => x !== '')))),
            }
          : undefined
      }
    />
  )
}

export function PacksPage(): ReactNode {
  const { api, holds } = useSession()
  const write = holds('caps:write')
  return (
    <ResourceList<Pack>
      title="Packs"
      note={<p className="hint">Upload a pack with `corral pack upload DIR`; here: list, clone into this org, delete.</p>}
      load={async (signal) => (await api.get<{ packs: Pack[] }>('/packs', {}, signal)).packs}
      rowKey={(p) => p.id}
      columns={[
        { label: 'Name', render: (p) => p.name },
        { label: 'Version', render: (p) => p.version },
        { label: 'Tier', render: (p) => p.tier },
        { label: 'Visibility', render: (p) => p.visibility },
        { label: 'Owned', render: (p) => (p.owned ? 'yes' : 'no') },
        { label: 'Digest', render: (p) => <code>{(p.image_digest ?? '').slice(0, 19)}</code> },
      ]}
      actions={
        write
          ? [
              { label: () => 'Clone', when: (p) => !p.owned, run: (p) => api.post(`/packs/${seg(p.id)}/clone`, {}) },
              { label: () => 'Delete', danger: true, when: (p) => Boolean(p.owned), run: (p) => api.del(`/packs/${seg(p.id)}`) },
            ]
          : []
      }
    />
  )
}
