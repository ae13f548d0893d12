// The agent callback (spec "Agent events"): `POST /task/{id}/event` from inside a workspace,
// reached through the proxy's second door (src/proxy/agent-callbacks.ts) after the capability
// token check. The body's `type` must be one of AGENT_EVENT_TYPES and the body must match that
// type's schema and the schema for it of every pack attached to the workspace's role
// (agent-event-schemas.ts; the packs the workspace's agent was started with); then the `agent_events` counters are debited through the
// proxy's budgets (a deny answers 429/403 and records nothing). The row is category `activity`,
// actor `agent`, with the raw body as `detail` and the debits on the row. `task_end` completes the task (the task runner then
// snapshots when the agent exits). `GET /tasks/next` serves the agent of a warm pool member
// (hand-over.ts nextTask): 200 with its task once claimed (with `?token=ahead`, first a 200 with only
// the claimed task's `proxy_token`), 204 + `Retry-After: 0` after a long poll with nothing, 410
// when there is no more work for it (cold agents get their task in the inbox).
import { AGENT_EVENT_TYPES, type AgentEventType, type AuditSink, CorralError, inputProblem } from '../contract/index.js'
import { AuditUnavailableError } from '../audit/index.js'
import { isStoreUnavailable } from '../store/index.js'
import type { AgentCallbackHandler, AgentEventCharge, CapabilityClaims, ControlReply } from '../contract/index.js'
import { agentEventViolation } from './agent-event-schemas.js'
import type { WorkspaceService } from './service.js'

/** What the callbacks need of the workspace service (its methods of the same names). */
export type AgentCallbackTarget = Pick<WorkspaceService, 'get' | 'task' | 'nextTask' | 'agentEventSchemas' | 'agentTaskEnded'>

const EVENT_PATH = /^\/task\/([A-Za-z0-9_-]{1,128})\/event\/?$/
const TYPES = new Set<string>(AGENT_EVENT_TYPES)

const refuse = (status: number, code: string, message: string, details?: Record<string, unknown>): ControlReply =>
  ({ status, body: { error: { code, message, ...(details ? { details } : {}) } } })

export class AgentEvents implements AgentCallbackHandler {
  readonly #service: AgentCallbackTarget
  readonly #audit: AuditSink

  constructor(service: AgentCallbackTarget, audit: AuditSink) {
    this.#service = service
    this.#audit = audit
  }

  async handle(claims: CapabilityClaims, method: string, path: string, body: Buffer, charge?: () => Promise<AgentEventCharge>, query?: URLSearchParams): Promise<ControlReply> {
    try {
      return await this.#handle(claims, method, path, body, charge, query)
    } catch (err) {
      // The database is away or the audit log is saturated: say so (503 + Retry-After, as the API
      // does) so an agent can retry — not a 500 that reads like a bug. (The reference agent's
      // event sink reports refusals once and moves on; nothing was recorded for this event.)
      if (isStoreUnavailable(err) || (err instanceof CorralError && err.status === 503)) {
        const retry = err instanceof AuditUnavailableError ? err.retryAfterSeconds : 2
        return { ...refuse(503, 'service_unavailable', 'the control plane cannot record this event right now; retry'), headers: { 'retry-after': String(retry) } }
      }
      throw err
    }
  }

  async #handle(claims: CapabilityClaims, method: string, path: string, body: Buffer, charge?: () => Promise<AgentEventCharge>, query?: URLSearchParams): Promise<ControlReply> {
    if (method === 'GET' && /^\/tasks\/next\/?$/.test(path)) {
      // `?token=ahead`: the agent takes the claimed task's token before the task (hand-over.ts nextTask).
      // Only the warm agent's unspent start-up token or the claimed task's token gets an answer.
      const as = claims.startup ? { startup: true as const, ...(claims.jti ? { jti: claims.jti } : {}) } : { ...(claims.task_id ? { taskId: claims.task_id } : {}) }
      const next = await this.#service.nextTask(claims.workspace_id, undefined, { tokenAhead: query?.get('token') === 'ahead', as })
      if (next === 'none') return refuse(410, 'no_more_tasks', 'this workspace has no more work for this agent')
      // A long poll that ended with nothing: ask again at once.
      if (next === 'wait') return { status: 204, headers: { 'retry-after': '0' } }
      return { status: 200, body: next }
    }
    const m = EVENT_PATH.exec(path)
    if (!m) return refuse(404, 'not_found', `no control-plane endpoint ${method} ${path}`)
    if (method !== 'POST') return refuse(405, 'method_not_allowed', 'agent events are POSTed')
    const taskId = m[1]!
    // A start-up token fetches the first task and nothing else (the proxy sends it no further).
    if (claims.startup) return refuse(403, 'permission_denied', 'a start-up token only fetches the first task')
    // A token minted for one task cannot write events of another.
    if (claims.task_id !== undefined && claims.task_id !== taskId) return refuse(403, 'permission_denied', 'the capability token is for another task')
    let event: Record<string, unknown>
    try {
      const parsed: unknown = JSON.parse(body.toString('utf8'))
      if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return refuse(400, 'validation_error', 'the body must be a JSON object')
      event = parsed as Record<string, unknown>
    } catch {
      return refuse(400, 'validation_error', 'the body is not valid JSON')
    }
    // The same edge check as the API's (src/contract/input-limits.ts): the row stores the body as detail,
    // so NUL, lone surrogates and deep nesting are refused here, never at the database.
    const unfit = inputProblem(event, 'body')
    if (unfit) return refuse(400, 'validation_error', `invalid input: ${unfit.field} ${unfit.problem}`, { fields: { [unfit.field]: unfit.problem } })
    if (typeof event.type !== 'string' || !TYPES.has(event.type)) {
      return refuse(400, 'validation_error', `type must be one of ${AGENT_EVENT_TYPES.join(', ')}`, { fields: { '/type': 'unknown agent event type' } })
    }
    const ws = await this.#service.get(claims.org_id, claims.workspace_id)
    const task = await this.#service.task(claims.org_id, taskId)
    if (!ws || !task || task.workspace_id !== ws.id) return refuse(404, 'not_found', `task ${taskId} not found in this workspace`)
    // corral's schema for the type and, for the packs of the role, theirs (compiled once per digest).
    const bad = agentEventViolation(event.type as AgentEventType, event, await this.#service.agentEventSchemas(ws.org_id, ws.id))
    if (bad) return refuse(400, 'validation_error', bad.message, { fields: bad.fields, ...(bad.packs.length ? { packs: bad.packs } : {}) })
    const charged = charge ? await charge() : undefined
    if (charged && !charged.ok) return refuse(charged.status, charged.reason, `agent event refused by the workspace policy (${charged.reason})`, charged.detail)
    await this.#audit.emit({
      org_id: ws.org_id, user_id: ws.created_by_user_id, event_type: event.type as AgentEventType,
      workspace_id: ws.id, task_id: taskId, agent_role: ws.role_name, agent_provider: ws.provider_name, detail: event,
      ...(charged?.ok ? { debits: charged.debits, budget_state: charged.budget_state } : {}),
    })
    if (event.type === 'task_end') {
      const status = event.status === 'completed' ? 'completed' : 'failed'
      const reason = typeof event.reason === 'string' ? event.reason : status === 'failed' ? 'agent_reported_failure' : undefined
      const summary = typeof event.summary === 'string' ? event.summary.slice(0, 4000) : undefined
      await this.#service.agentTaskEnded(ws.id, taskId, status, reason, summary)
    }
    return { status: 202, body: { status: 'accepted' } }
  }
}
