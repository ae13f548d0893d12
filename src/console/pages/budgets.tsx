// Budgets per workspace: each counter of the workspace's role policy with its ceilings and TTL
// windows (from POST /v1/caps/lint over the role's caps.yaml), against its usage: the counter's
// state at the last decision that touched it (`budget_state`, per scope: used, max, remaining) and
// the sum of its debits (`metric=sum:debits.<counter>` on the workspace's stats).
import type { ReactNode } from 'react'
import { seg } from '../api.js'
import { href, navigate, type Route } from '../router.js'
import { useSession } from '../session.js'
import { Status, useLoad, when } from '../ui.js'
import type { AgentRoleRecord, AuditEvent, WorkspaceRecord } from '../wire.js'

interface Scope {
  max: number
  ttl?: string
}
interface Counter {
  capability: string
  name: string
  source: string
  workspace?: Scope
  task?: Scope
}
interface ScopeState {
  used?: number
  max?: number
  remaining?: number
}

export function BudgetsPage(props: { route: Route }): ReactNode {
  const { api } = useSession()
  const wsId = props.route.params.get('workspace') ?? ''
  const list = useLoad((signal) => api.get<{ workspaces: WorkspaceRecord[] }>('/workspaces', {}, signal), [])
  return (
    <section aria-labelledby="budgets-title">
      <h1 id="budgets-title">Budgets</h1>
      <label>
        Workspace{' '}
        <select value={wsId} onChange={(e) => navigate(['budgets'], { workspace: e.target.value })}>
          <option value="">choose a workspace</option>
          {(list.data?.workspaces ?? []).map((w) => (
            <option key={w.id} value={w.id}>
              {w.id} ({w.role_name}, {w.state})
            </option>
          ))}
        </select>
      </label>
      <Status loaded={list} />
      {wsId && <WorkspaceBudgets id={wsId} />}
    </section>
  )
}

function WorkspaceBudgets(props: { id: string }): ReactNode {
  const { api } = useSession()
  const data = useLoad(
    async (signal) => {
      const ws = await api.get<WorkspaceRecord>(`/workspaces/${seg(props.id)}`, {}, signal)
      const role = await api.get<AgentRoleRecord>(`/agent-roles/${seg(ws.role_id)}`, {}, signal)
      const lint = await api.call<{ valid: boolean; counters: Counter[] }>('POST', '/caps/lint', { body: { capabilities: role.capabilities ?? '' }, signal })
      const usage = await Promise.all(
        lint.counters.map(async (c) => {
          const [last, sum] = await Promise.all([
            api.get<{ events: AuditEvent[] }>(`/workspaces/${seg(props.id)}/audit`, { filter: ['event_type=policy_decision', `counter=${c.name}`], limit: 1 }, signal),
            api.get<{ buckets: { value: number }[] }>(`/workspaces/${seg(props.id)}/audit/stats`, { metric: `sum:debits.${c.name}`, filter: [`counter=${c.name}`] }, signal),
          ])
          const event = last.events[0]
          const state = (event?.budget_state?.[c.name] ?? {}) as Record<string, ScopeState>
          return { counter: c, state, at: event?.timestamp, total: sum.buckets.reduce((n, b) => n + b.value, 0) }
        }),
      )
      return { ws, role, valid: lint.valid, usage }
    },
    [props.id],
  )
  if (!data.data) return <Status loaded={data} />
  const { ws, role, valid, usage } = data.data
  return (
    <div>
      <p>
        <a href={href(['workspaces', ws.id])}>{ws.id}</a> runs role <a href={href(['policies'], { role: role.id })}>{role.name}</a>.
        {!valid && <span className="error"> Its policy does not compile.</span>}
      </p>
      {usage.length === 0 && <p className="muted">The role's policy declares no budget counters.</p>}
      {usage.length > 0 && (
        <table aria-label="Budget counters">
          <thead>
            <tr>
              <th scope="col">Capability</th>
              <th scope="col">Counter</th>
              <th scope="col">Source</th>
              <th scope="col">Workspace: used / ceiling (window)</th>
              <th scope="col">Task: used / ceiling (window)</th>
              <th scope="col">Debited in total</th>
              <th scope="col">As of</th>
            </tr>
          </thead>
          <tbody>
            {usage.map(({ counter, state, total, at }) => (
              <tr key={`${counter.capability}/${counter.name}`}>
                <td>{counter.capability}</td>
                <td className="mono">{counter.name}</td>
                <td>{counter.source}</td>
                <td>
                  <Usage scope={counter.workspace} state={state.workspace} />
                </td>
                <td>
                  <Usage scope={counter.task} state={state.task} />
                </td>
                <td>{total}</td>
                <td>{at ? when(at) : 'never used'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  )
}

function Usage(props: { scope?: Scope; state?: ScopeState }): ReactNode {
  if (!props.scope) return <span className="muted">no ceiling</span>
  const max = props.scope.max
  const used = props.state?.used ?? 0
  const window = props.scope.ttl ? `per ${props.scope.ttl}` : 'never resets'
  if (max === 0) return <span>{used} / unlimited ({window})</span>
  return (
    <span>
      <meter min={0} max={max} value={Math.min(used, max)} aria-label={`${used} of ${max}`} /> {used} / {max} ({window})
    </span>
  )
}
