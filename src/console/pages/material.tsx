// Org secrets (names only: a value is write-only; auth:write). Credentials are in credentials.tsx.
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
