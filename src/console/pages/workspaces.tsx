// Workspaces: every workspace of the org (GET /v1/workspaces), filterable by state and role, each
// linking to its page.
import { useState, type FormEvent, type ReactNode } from 'react'
import { WORKSPACE_STATES as STATES } from '../../contract/resources.js'
import type { AgentRoleRecord, WorkspaceRecord } from '../wire.js'
import { href, navigate, type Route } from '../router.js'
import { useSession } from '../session.js'
import { ErrorBox, Status, useAction, useLoad, when } from '../ui.js'

/** The most the API lists at once (newest first; it has no cursor). */
const LIMIT = 1000

export function WorkspacesPage(props: { route: Route }): ReactNode {
  const { api, me } = useSession()
  const state = props.route.params.get('state') ?? ''
  const role = props.route.params.get('role') ?? ''
  const mine = props.route.params.get('mine') === '1'
  // The creator of a workspace is the user, or the API key that created it (docs/workspaces.md).
  const creator = mine ? (me.kind === 'api_key' ? me.key_id : me.user_id) : undefined
  const list = useLoad((signal) => api.get<{ workspaces: WorkspaceRecord[] }>('/workspaces', { state, role, creator, limit: LIMIT }, signal), [state, role, creator])
  const roles = useLoad((signal) => api.get<{ agent_roles: AgentRoleRecord[] }>('/agent-roles', {}, signal), [])
  const setFilter = (next: { state?: string; role?: string; mine?: string }) => navigate(['workspaces'], { state, role, mine: mine ? '1' : undefined, ...next })
  return (
    <section aria-labelledby="ws-title">
      <h1 id="ws-title">Workspaces</h1>
      <NewTask roles={(roles.data?.agent_roles ?? []).filter((r) => !r.archived_at)} />
      <form className="filters" aria-label="Filter workspaces" onSubmit={(e) => e.preventDefault()}>
        <label>
          State
          <select value={state} onChange={(e) => setFilter({ state: e.target.value })}>
            <option value="">any</option>
            {STATES.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
        <label>
          Role
          <select value={role} onChange={(e) => setFilter({ role: e.target.value })}>
            <option value="">any</option>
            {(roles.data?.agent_roles ?? []).map((r) => (
              <option key={r.id} value={r.name}>
                {r.name}
              </option>
            ))}
          </select>
        </label>
        <label className="inline">
          <input type="checkbox" checked={mine} onChange={(e) => setFilter({ mine: e.target.checked ? '1' : undefined })} /> created by me
        </label>
      </form>
      <Status loaded={list} />
      {list.data?.workspaces.length === LIMIT && <p className="hint">The newest {LIMIT} are shown; narrow the list with a filter.</p>}
      {list.data && (
        <table>
          <thead>
            <tr>
              <th scope="col">Workspace</th>
              <th scope="col">State</th>
              <th scope="col">Role</th>
              <th scope="col">Tasks</th>
              <th scope="col">Created</th>
              <th scope="col">Last activity</th>
            </tr>
          </thead>
          <tbody>
            {list.data.workspaces.map((w) => (
              <tr key={w.id}>
                <td>
                  <a href={href(['workspaces', w.id])}>{w.id}</a>
                </td>
                <td>
                  <span className={`state state-${w.state}`}>{w.state}</span>
                </td>
                <td>{w.role_name}</td>
                <td>{w.task_count}</td>
                <td>{when(w.created_at)}</td>
                <td>{when(w.last_activity_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {list.data?.workspaces.length === 0 && <p>No workspaces match.</p>}
    </section>
  )
}

/** POST /v1/tasks: a new workspace from a role with its first task; then its page. */
function NewTask(props: { roles: readonly AgentRoleRecord[] }): ReactNode {
  const { api, can } = useSession()
  const [role, setRole] = useState('')
  const [description, setDescription] = useState('')
  const action = useAction()
  if (!can('workspace:write') || !can('tasks:write')) return null
  const submit = (e: FormEvent) => {
    e.preventDefault()
    void action.run(async () => {
      const accepted = await api.post<{ workspace_id: string }>('/tasks', { role_name: role || props.roles[0]?.name, description })
      navigate(['workspaces', accepted.workspace_id])
    })
  }
  return (
    <form onSubmit={submit} aria-label="New task" className="filters">
      <label>
        Role for the new task
        <select value={role} onChange={(e) => setRole(e.target.value)}>
          {props.roles.map((r) => (
            <option key={r.id} value={r.name}>
              {r.name}
            </option>
          ))}
        </select>
      </label>
      <label className="grow">
        Task description
        <input value={description} onChange={(e) => setDescription(e.target.value)} required />
      </label>
      <button type="submit" className="primary" disabled={action.busy || description.trim() === '' || props.roles.length === 0}>
        Submit task
      </button>
      <ErrorBox error={action.error} />
    </form>
  )
}
