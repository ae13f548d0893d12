// Who may call the API: API keys (create shows the secret once; revoke) and the org's members
// (invite, change role, remove). Writes need apikeys:write / auth:write.
import type { ReactNode } from 'react'
import { MEMBERSHIP_ROLES, PERMISSION_SETS } from '../../contract/resources.js'
import { seg } from '../api.js'
import { ResourceList } from '../resource.js'
import { useSession } from '../session.js'
import { when } from '../ui.js'

interface ApiKey {
  id: string
  label: string
  prefix: string
  permission_set: string
  created_at: string
  last_used_at?: string
}

interface Membership {
  user_id: string
  email: string
  role: string
  status: string
  created_at: string
}

// Least privilege first: the first option is the form's default.
const ROLES = [...MEMBERSHIP_ROLES].reverse()

export function KeysPage(): ReactNode {
  const { api, holds } = useSession()
  const write = holds('apikeys:write')
  return (
    <ResourceList<ApiKey>
      title="API keys"
      load={async (signal) => (await api.get<{ api_keys: ApiKey[] }>('/api-keys', {}, signal)).api_keys}
      rowKey={(k) => k.id}
      columns={[
        { label: 'Label', render: (k) => k.label },
        { label: 'Key', render: (k) => <code>{k.prefix}…</code> },
        { label: 'Permission set', render: (k) => k.permission_set },
        { label: 'Created', render: (k) => when(k.created_at) },
        { label: 'Last used', render: (k) => when(k.last_used_at) },
      ]}
      actions={write ? [{ label: () => 'Revoke', danger: true, run: (k) => api.del(`/api-keys/${seg(k.id)}`) }] : []}
      create={
        write
          ? {
              title: 'Create API key',
              fields: [
                { name: 'label', label: 'Label', required: true },
                { name: 'permission_set', label: 'Permission set', type: 'select', options: [...PERMISSION_SETS].reverse(), required: true },
              ],
              submit: async (v) => {
                const created = await api.post<{ value: string }>('/api-keys', { label: v.label, permission_set: v.permission_set })
                return (
                  <>
                    Copy the new key now; it is not shown again: <code data-testid="new-key">{created.value}</code>
                  </>
                )
              },
            }
          : undefined
      }
    />
  )
}

export function MembersPage(): ReactNode {
  const { api, me, holds } = useSession()
  const write = holds('auth:write')
  const org = seg(me.org.id)
  return (
    <ResourceList<Membership>
      title="Members"
      load={async (signal) => (await api.get<{ memberships: Membership[] }>(`/orgs/${org}/memberships`, {}, signal)).memberships}
      rowKey={(m) => m.user_id}
      columns={[
        { label: 'Email', render: (m) => m.email },
        { label: 'Role', render: (m) => m.role },
        { label: 'Status', render: (m) => m.status },
        { label: 'Since', render: (m) => when(m.created_at) },
      ]}
      actions={
        write
          ? [
              ...ROLES.map((role) => ({ label: () => `Make ${role}`, when: (m: Membership) => m.role !== role, run: (m: Membership) => api.patch(`/orgs/${org}/memberships/${seg(m.user_id)}`, { role }) })),
              { label: () => 'Remove', danger: true, run: (m: Membership) => api.del(`/orgs/${org}/memberships/${seg(m.user_id)}`) },
            ]
          : []
      }
      create={
        write
          ? {
              title: 'Invite member',
              fields: [
                { name: 'email', label: 'Email', required: true },
                { name: 'role', label: 'Role', type: 'select', options: ROLES, required: true },
              ],
              submit: async (v) => void (await api.post(`/orgs/${org}/memberships`, { email: v.email, role: v.role })),
            }
          : undefined
      }
    />
  )
}
