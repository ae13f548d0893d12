// The proxy's second door: requests from a workspace to `corral.internal` (the agent's default
// CORRAL_EVENTS_URL, docs/agent.md) are agent callbacks to the control plane, answered here after
// the capability-token check instead of going upstream. The proxy owns the interface
// (AgentCallbackHandler); the workspace lifecycle implements it (src/workspaces/agent-callbacks.ts)
// and the composition root hands it to the proxy as the `agentCallbacks` option — no registry.
// These requests are not outbound traffic: they write their own audit rows (agent events) instead
// of a policy_decision. A missing or bad token takes the normal path and is denied there with its
// decision row (no credential: the 407 challenge; a bad one: invalid_token).
import type { IncomingMessage, ServerResponse } from 'node:http'
import { isStoreUnavailable } from '../store/index.js'
import { makeCounter, type CompiledCounter } from '../policy/index.js'
import { PolicyDenial } from './decision.js'
import type { Entry, ProxyCore } from './request-state.js'
import { requestToken } from './token.js'
import type { AgentEventCharge, CapabilityClaims, ControlReply } from '../contract/index.js'

/** The agent's task poll: the one endpoint a start-up token reaches. */
const TASK_POLL = /^\/tasks\/next\/?$/
/** Largest callback body accepted (an agent event). */
const MAX_BODY_BYTES = 1024 * 1024

/** The capability whose counters gate agent events (docs/workspaces.md, "Agent events"). */
export const AGENT_EVENTS_CAPABILITY = 'agent_events'

/** Used when the policy has no `agent_events` capability: one `requests` unit per event, no ceiling. */
const DEFAULT_AGENT_EVENT_COUNTERS: readonly CompiledCounter[] = [makeCounter({
  name: 'requests', capability: AGENT_EVENTS_CAPABILITY, source: 'request.count', phase: 'request',
  reservePerRequest: 0, failureCharge: 0, maxConcurrent: 0, statusCodes: [],
})]

/**
 * Debits one agent event against the workspace's budgets through the proxy's own Budgets (same
 * ledgers, leases and deny reasons as outbound traffic). Request-sourced counters count
 * (request.count 1, request.bytes the body size); response-sourced ones have nothing to count.
 */
async function chargeAgentEvent(core: ProxyCore, claims: CapabilityClaims, bodyBytes: number): Promise<AgentEventCharge> {
  if (!core.budgets) return { ok: true, debits: {}, budget_state: {} }
  const got = await core.workspaces.get(claims.org_id, claims.workspace_id)
  const active = got.ok ? got.workspace : undefined
  if (!active) return { ok: false, status: 403, reason: 'workspace_not_activated', detail: {} }
  if (active.policy.kind === 'error') return { ok: false, status: 403, reason: 'policy_error', detail: { message: active.policy.message } }
  const declared = active.policy.kind === 'ok' ? active.policy.policy.counters(AGENT_EVENTS_CAPABILITY) : []
  const counters = declared.length ? declared : DEFAULT_AGENT_EVENT_COUNTERS
  const held = await core.budgets.reserve(claims.org_id, claims.workspace_id, claims.task_id, counters, bodyBytes)
  if (held instanceof PolicyDenial) return { ok: false, status: held.status, reason: held.reason, detail: held.detail }
  const settled = await core.budgets.settle(held, new Map(counters.map((c) => [c.name, { value: c.requestAmount(bodyBytes) }])))
  return { ok: true, debits: settled.debits, budget_state: settled.budgetState }
}

/** True when the request was answered here; false to let the normal phases run (and deny). */
export async function serveAgentCallback(core: ProxyCore, req: IncomingMessage, res: ServerResponse, entry: Entry, path: string): Promise<boolean> {
  const handler = core.agentCallbacks?.()
  if (!handler) return false
  const check = await requestToken(core.tokens, req, entry.tunnel)
  if (!check.ok) return false
  // A start-up token reaches the task poll only; anything else takes the normal path, which
  // denies it with its decision row (token-scope.ts).
  if (check.claims.startup && !(req.method === 'GET' && TASK_POLL.test(path))) return false
  // Activate the workspace's proxy state now (policy compile, ledgers): a warm agent polling for
  // its task thereby has it ready before the task's first event or model call needs it.
  void Promise.resolve(core.workspaces.get(check.claims.org_id, check.claims.workspace_id)).catch(() => undefined)
  let reply: ControlReply
  try {
    const body = await readBody(req)
    reply = body === undefined
      ? { status: 413, body: { error: { code: 'payload_too_large', message: 'agent callback body over 1 MiB' } } }
      : await handler.handle(check.claims, (req.method ?? 'GET').toUpperCase(), path, body, () => chargeAgentEvent(core, check.claims, body.length), queryOf(req.url))
  } catch (err) {
    // A store outage is transient (503 + Retry-After, like the API); anything else is our fault.
    reply = isStoreUnavailable(err)
      ? { status: 503, headers: { 'retry-after': '2' }, body: { error: { code: 'service_unavailable', message: 'the database is unavailable; retry after Retry-After' } } }
      : { status: 500, body: { error: { code: 'internal_error', message: 'the control plane failed to handle the callback' } } }
  }
  if (res.headersSent) return true
  const text = reply.body === undefined ? '' : JSON.stringify(reply.body)
  res.writeHead(reply.status, {
    ...(text ? { 'content-type': 'application/json' } : {}),
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
    ...reply.headers,
  })
  res.end(text)
  return true
}

function queryOf(url: string | undefined): URLSearchParams {
  const at = url?.indexOf('?') ?? -1
  return new URLSearchParams(at >= 0 ? url!.slice(at + 1) : '')
}

async function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of req) {
    size += (chunk as Buffer).length
    if (size > MAX_BODY_BYTES) return undefined
    chunks.push(chunk as Buffer)
  }
  return Buffer.concat(chunks)
}
