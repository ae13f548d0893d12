// The interface of the proxy's second door (agent-callbacks.ts): what the proxy hands an agent
// callback to once its capability token verified, and the reply it expects. The proxy owns it;
// the workspace lifecycle implements it. Types only (plus the host name), so the proxy's shared
// request state can name the option without importing the door itself.
import type { CapabilityClaims } from './token.js'

/** The host agent callbacks go to (the agent's default CORRAL_EVENTS_URL, docs/agent.md). */
export const CONTROL_HOST = 'corral.internal'

export interface ControlReply {
  status: number
  body?: unknown
  headers?: Record<string, string>
}

/** The outcome of debiting the `agent_events` counters for one callback. */
export type AgentEventCharge =
  | { ok: true; debits: Record<string, number>; budget_state: Record<string, unknown> }
  | { ok: false; status: number; reason: string; detail: Record<string, unknown> }

/** What the proxy calls for an agent callback that passed the token check. */
export interface AgentCallbackHandler {
  /**
   * `charge` debits the workspace's `agent_events` counters (call it once the body is valid, just
   * before recording it). Absent when the handler is driven without a proxy (tests): no gate.
   */
  handle(claims: CapabilityClaims, method: string, path: string, body: Buffer, charge?: () => Promise<AgentEventCharge>, query?: URLSearchParams): Promise<ControlReply>
}

/**
 * The `agentCallbacks` option: read at each callback, so a composition root that builds the
 * handler after the proxy listens (the controller needs the proxy's address) passes a getter over
 * its variable. Undefined (no handler yet, or none at all): the host goes through policy like any
 * other and is denied there.
 */
export type AgentCallbacks = () => AgentCallbackHandler | undefined
