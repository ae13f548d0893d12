// One workspace: its record and its tasks.
import type { ReactNode } from 'react'
import type { TaskRecord, WorkspaceRecord } from '../wire.js'
import { seg } from '../api.js'
import { useSession } from '../session.js'
import { Status, useLoad, when } from '../ui.js'

export function WorkspacePage(props: { id: string }): ReactNode {
  const { api } = useSession()
  const ws = useLoad((signal) => api.get<WorkspaceRecord>(`/workspaces/${seg(props.id)}`, {}, signal), [props.id])
  const tasks = useLoad((signal) => api.get<{ tasks: TaskRecord[] }>(`/workspaces/${seg(props.id)}/tasks`, {}, signal), [props.id])
  return (
    <section aria-labelledby="ws-title">
      <h1 id="ws-title">Workspace {props.id}</h1>
      <Status loaded={ws} />
      {ws.data && (
        <dl className="facts">
          <dt>State</dt>
          <dd>{ws.data.state}</dd>
          <dt>Role</dt>
          <dd>{ws.data.role_name}</dd>
          <dt>Provider</dt>
          <dd>{ws.data.provider_name}</dd>
          <dt>Created</dt>
          <dd>{when(ws.data.created_at)}</dd>
        </dl>
      )}
      <h2>Tasks</h2>
      <Status loaded={tasks} />
      <ol className="tasks">
        {(tasks.data?.tasks ?? []).map((t) => (
          <li key={t.id}>
            <code>{t.id}</code> <span className={`state state-${t.status}`}>{t.status}</span> {t.description}
          </li>
        ))}
      </ol>
    </section>
  )
}
