// The outbound proxy's face (docs/proxy.md): the service a composition root builds and starts,
// the capability tokens it verifies (and the control plane mints), the corral CA, and the
// interface of the agent-callback handler it is given (agent-callbacks.ts). Other folders import
// from here, never from the files beside it.
export { ProxyService, DEFAULT_PROXY_PORT, DEFAULT_MAX_INSPECT_BYTES, type ProxyServiceOptions } from './service.js'
export { CapabilityTokens, loadTokenKey, TOKEN_KEY_SETTING, type CapabilityClaims, type TokenCheck, type TokenKeySettings } from './token.js'
export { caCertPath, caFingerprint, LeafMinter, loadOrCreateCa, type CorralCa } from './ca.js'
export { AGENT_EVENTS_CAPABILITY } from './agent-callbacks.js'
export { CONTROL_HOST, type AgentCallbackHandler, type AgentCallbacks, type AgentEventCharge, type ControlReply } from './agent-callback-handler.js'
export { TASK_ENDED_CHANNEL } from './task-liveness.js'
export type { Endpoint } from './address-guard.js'
export type { WorkspaceDirectory, WorkspaceRecord } from './workspaces.js'
export type { ProxyLimits } from './limits.js'
export type { ProxyCounters, ProxyLog } from './request-state.js'
