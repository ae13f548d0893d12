// One workspace: its record, actions (follow-up, cancel, stop, fork at task N, archive), its tasks,
// the live timeline with policy decisions inline, and the files of its latest snapshot. Actions the
// caller's permissions do not allow are not shown; the API refuses them anyway.
import { useEffect, useState, type FormEvent, type ReactNode } from 'react'
import { seg } from '../api.js'
import { href, navigate } from '../router.js'
import { useSession } from '../session.js'
import { ErrorBox, Status, useAction, useLoad, when } from '../ui.js'
import type { TaskLifecycleStatus, TaskRecord, WorkspaceRecord, WorkspaceState } from '../wire.js'
import { SnapshotFiles } from './workspace-files.js'
import { WorkspaceTimeline } from './workspace-live.js'

const ACTIVE: readonly string[] = ['submitted', 'running'] satisfies readonly TaskLifecycleStatus[]
const TRANSIENT: readonly string[] = ['provisioning', 'busy', 'stopping'] satisfies readonly WorkspaceState[]
const POLL_MS = 2000

export function WorkspacePage(props: { id: string }): ReactNode {
  const { api } = useSession()
  const ws = useLoad((signal) => api.get<WorkspaceRecord>(`/workspaces/${seg(props.id)}`, {}, signal), [props.id])
  const tasks = useLoad((signal) => api.get<{ tasks: TaskRecord[] }>(`/workspaces/${seg(props.id)}/tasks`, {}, signal), [props.id])
  const refresh = () => (ws.reload(), tasks.reload())
  // Some moves have no event of their own (busy → idle once the snapshot is taken): while the
  // workspace is in motion, its record is read again every few seconds.
  const moving = TRANSIENT.includes(ws.data?.state ?? '') || (tasks.data?.tasks ?? []).some((t) => ACTIVE.includes(t.status))
  useEffect(() => {
    if (!moving) return
    const timer = setInterval(refresh, POLL_MS)
    return () => clearInterval(timer)
  }, [moving])
  // Lifecycle events change what the page shows: reload the record and tasks when one arrives.
  const onEvent = (e: { event_type: string; actor: string }) => {
    if (e.actor !== 'agent' && e.event_type !== 'policy_decision') refresh()
  }
  return (
    <section aria-labelledby="ws-title">
      <h1 id="ws-title">Workspace {props.id}</h1>
      <Status loaded={ws} />
      {ws.data && <Facts ws={ws.data} />}
      {ws.data && <Actions ws={ws.data} tasks={tasks.data?.tasks ?? []} onDone={refresh} />}
      <h2>Tasks</h2>
      <Status loaded={tasks} />
      <table aria-label="Tasks">
        <thead>
          <tr>
            <th scope="col">#</th>
            <th scope="col">Task</th>
            <th scope="col">Status</th>
            <th scope="col">Description</th>
            <th scope="col">Created</th>
          </tr>
        </thead>
        <tbody>
          {(tasks.data?.tasks ?? []).map((t, i) => (
            <tr key={t.id}>
              <td>{i + 1}</td>
              <td className="mono">{t.id}</td>
              <td>
                <span className={`state state-${t.status}`}>{t.status}</span>
                {t.reason ? ` (${t.reason})` : ''}
              </td>
              <td>{t.description}</td>
              <td>{when(t.created_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <WorkspaceTimeline id={props.id} onEvent={onEvent} />
      {ws.data && <SnapshotFiles ws={ws.data} />}
    </section>
  )
}

function Facts(props: { ws: WorkspaceRecord }): ReactNode {
  const w = props.ws
  return (
    <dl className="facts">
      <dt>State</dt>
      <dd>
        <span className={`state state-${w.state}`} data-testid="workspace-state">
          {w.state}
        </span>
        {w.failure ? ` — ${w.failure}` : ''}
      </dd>
      <dt>Role</dt>
      <dd>{w.role_name}</dd>
      <dt>Provider</dt>
      <dd>{w.provider_name}</dd>
      <dt>Created</dt>
      <dd>
        {when(w.created_at)} by {w.created_by}
      </dd>
      {w.parent_workspace_id && (
        <>
          <dt>Forked from</dt>
          <dd>
            <a href={href(['workspaces', w.parent_workspace_id])}>{w.parent_workspace_id}</a> at task {w.fork_point_task_count}
          </dd>
        </>
      )}
      <dt>Budgets</dt>
      <dd>
        <a href={href(['budgets'], { workspace: w.id })}>usage against ceilings</a>
      </dd>
    </dl>
  )
}

// long-function: the action bar reads best as one form with its permission checks side by side
function Actions(props: { ws: WorkspaceRecord; tasks: readonly TaskRecord[]; onDone: () => void }): ReactNode {
  const { api, can } = useSession()
  const action = useAction()
  const [followUp, setFollowUp] = useState('')
  const [reset, setReset] = useState(false)
  const [forkAt, setForkAt] = useState(String(props.tasks.filter((t) => t.status === 'completed').length))
  const w = props.ws
  const id = seg(w.id)
  const active = props.tasks.find((t) => ACTIVE.includes(t.status))
  const archived = w.state === 'archived'
  const run = (fn: () => Promise<unknown>) => void action.run(fn).then((ok) => ok && props.onDone())
  const submit = (e: FormEvent) => {
    e.preventDefault()
    run(async () => {
      await api.post(`/workspaces/${id}/tasks`, { description: followUp, ...(reset ? { reset_session: true } : {}) })
      setFollowUp('')
      setReset(false)
    })
  }
  return (
    <div>
      {can('tasks:write') && !archived && (
        <form onSubmit={submit} aria-label="Follow-up task">
          <label htmlFor="follow-up">Follow-up task</label>
          <textarea id="follow-up" value={followUp} onChange={(e) => setFollowUp(e.target.value)} required />
          <label className="inline">
            <input type="checkbox" checked={reset} onChange={(e) => setReset(e.target.checked)} /> start with a fresh agent session (forget the conversation so far)
          </label>{' '}
          <button type="submit" className="primary" disabled={action.busy || followUp.trim() === ''}>
            Submit follow-up
          </button>
        </form>
      )}
      <div className="actions" role="group" aria-label="Workspace actions">
        {can('tasks:write') && active && (
          <button type="button" disabled={action.busy} onClick={() => run(() => api.post(`/tasks/${seg(active.id)}/cancel`))}>
            Cancel task
          </button>
        )}
        {can('workspace:write') && !['stopped', 'stopping', 'archived'].includes(w.state) && (
          <button type="button" disabled={action.busy} onClick={() => run(() => api.post(`/workspaces/${id}/stop`))}>
            Stop
          </button>
        )}
        {can('workspace:write') && (
          <button type="button" className="danger" disabled={action.busy} onClick={() => run(() => (archived ? api.post(`/workspaces/${id}/unarchive`) : api.post(`/workspaces/${id}/archive`)))}>
            {archived ? 'Unarchive' : 'Archive'}
          </button>
        )}
        {/* Forking needs only workspace:read (spec): the fork is the forker's own workspace. */}
        {can('workspace:read') && (
          <span>
            <label htmlFor="fork-at">Fork at task</label>{' '}
            <input id="fork-at" type="number" min={0} max={w.task_count} value={forkAt} onChange={(e) => setForkAt(e.target.value)} size={4} />{' '}
            <button
              type="button"
              disabled={action.busy}
              onClick={() =>
                run(async () => {
                  const child = await api.post<{ workspace_id: string }>(`/workspaces/${id}/fork`, { fork_point_task_count: Number(forkAt) })
                  navigate(['workspaces', child.workspace_id])
                })
              }
            >
              Fork
            </button>
          </span>
        )}
      </div>
      <ErrorBox error={action.error} />
    </div>
  )
}
