// The proxy's `agentCallbacks` option. The handler interface it names (AgentCallbackHandler, with
// CONTROL_HOST and the reply types) is in src/contract/, shared with the workspace lifecycle that
// implements it; this getter type is the proxy's alone.
import type { AgentCallbackHandler } from '../contract/index.js'

/**
 * The `agentCallbacks` option: read at each callback, so a composition root that builds the
 * handler after the proxy listens (the controller needs the proxy's address) passes a getter over
 * its variable. Undefined (no handler yet, or none at all): the host goes through policy like any
 * other and is denied there.
 */
export type AgentCallbacks = () => AgentCallbackHandler | undefined
