// Org secrets (names only: a value is write-only; auth:write) and credentials with their status
// (auth:write, or auth:write:own for one's personal credentials).
import type { ReactNode } from 'react'
import { seg } from '../api.js'
import { ResourceList } from '../resource.js'
import { useSession } from '../session.js'
import { when } from '../ui.js'

interface Secret {
  name: string
  created_at: string
  updated_at: string
}

interface Credential {
  id: string
  name: string
  provider: string
  kind: string
  status: string
  created_at: string
}

export function SecretsPage(): ReactNode {
  const { api, holds } = useSession()
  const write = holds('auth:write')
  return (
    <ResourceList<Secret>
      title="Secrets"
      note={<p className="hint">Values are write-only: the API never returns them.</p>}
      load={async (signal) => (await api.get<{ secrets: Secret[] }>('/secrets', {}, signal)).secrets}
      rowKey={(s) => s.name}
      columns={[
        { label: 'Name', render: (s) => <code>{s.name}</code> },
        { label: 'Created', render: (s) => when(s.created_at) },
        { label: 'Updated', render: (s) => when(s.updated_at) },
      ]}
      actions={write ? [{ label: () => 'Delete', danger: true, run: (s) => api.del(`/secrets/${seg(s.name)}`) }] : []}
      create={
        write
          ? {
              title: 'Set secret',
              fields: [
                { name: 'name', label: 'Name', required: true },
                { name: 'value', label: 'Value', type: 'password', required: true },
              ],
              submit: async (v) => void (await api.post('/secrets', { name: v.name, value: v.value })),
            }
          : undefined
      }
    />
  )
}

export function CredentialsPage(): ReactNode {
  // auth:write:own counts here: the API narrows such a caller to their personal credentials.
  const { api, can } = useSession()
  const write = can('auth:write')
  return (
    <ResourceList<Credential>
      title="Credentials"
      note={<p className="hint">Material is write-only; the status says whether the proxy can mint with it.</p>}
      load={async (signal) => (await api.get<{ credentials: Credential[] }>('/credentials', {}, signal)).credentials}
      rowKey={(c) => c.id}
      columns={[
        { label: 'Name', render: (c) => <code>{c.name}</code> },
        { label: 'Provider', render: (c) => c.provider },
        { label: 'Kind', render: (c) => c.kind },
        { label: 'Status', render: (c) => <span className={`state state-${c.status}`}>{c.status}</span> },
        { label: 'Created', render: (c) => when(c.created_at) },
      ]}
      actions={write ? [{ label: () => 'Delete', danger: true, run: (c) => api.del(`/credentials/${seg(c.id)}`) }] : []}
    />
  )
}
