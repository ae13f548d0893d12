// The words the proxy and the workspace lifecycle share about agent callbacks, the proxy's second
// door (docs/proxy.md): the host name agents call, the claims of a verified capability token, and
// the handler interface the proxy calls and src/workspaces/ implements. Here, in the contract,
// because neither of those two parts may import the other (docs/design.md "Layout"); src/serve/
// hands the one to the other. Types only, plus the host name.

/** The host agent callbacks go to (the agent's default CORRAL_EVENTS_URL, docs/agent.md). */
export const CONTROL_HOST = 'corral.internal'

/** What a verified capability token names (src/secrets/ mints and verifies it). */
export interface CapabilityClaims {
  org_id: string
  workspace_id: string
  task_id?: string
  /** A start-up token: good only for the agent's first task poll (docs/security.md "Tokens with the narrowest scope"). */
  startup?: true
  /** Token id; set on start-up tokens, which the controller accepts once. */
  jti?: string
  /** Expiry, seconds since the epoch. */
  exp: number
}

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
