// The outbound proxy's face (docs/proxy.md): the service a composition root builds and starts,
// the capability tokens it verifies (and the control plane mints), the corral CA, and the
// interface of the agent-callback handler it is given (agent-callbacks.ts). Other folders import
// from here, never from the files beside it.
export { ProxyService, DEFAULT_PROXY_PORT, DEFAULT_MAX_INSPECT_BYTES, type ProxyServiceOptions } from './service.js'
export type { ConcurrencyPermitSource } from './budgets.js'
export { caCertPath, caFingerprint, LeafMinter, loadOrCreateCa, type CorralCa } from './ca.js'
export { AGENT_EVENTS_CAPABILITY } from './agent-callbacks.js'
export type { AgentCallbacks } from './agent-callback-handler.js'
export type { Endpoint } from '../net/index.js'
export type { WorkspaceDirectory, WorkspaceRecord } from './workspaces.js'
export type { ProxyLimits } from './limits.js'
export type { ProxyCounters, ProxyLog } from './request-state.js'
