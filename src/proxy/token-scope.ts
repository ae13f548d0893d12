// What a verified capability token may reach beyond the agent callbacks (docs/security.md
// "Tokens with the narrowest scope"): never a start-up token (it fetches the agent's first task
// only, agent-callbacks.ts), and a task token only while its task is live (task-liveness.ts).
// Both are `invalid_token` denials with their decision row; the detail says which.
import { deny, type PolicyDenial } from './decision.js'
import { andThen, type MaybePromise } from './maybe.js'
import type { ProxyCore } from './request-state.js'
import type { CapabilityClaims } from '../contract/index.js'

/** The denial, or undefined; a promise of it only when a task's liveness is not cached yet. */
export function outboundScopeDenial(core: ProxyCore, claims: CapabilityClaims): MaybePromise<PolicyDenial | undefined> {
  if (claims.startup) return deny('invalid_token', { token: 'startup', message: 'a start-up token only fetches the first task; the task brings its own token' })
  if (!claims.task_id || !core.tasks) return undefined
  return andThen(core.tasks.live(claims.workspace_id, claims.task_id), taskScope)
}

function taskScope(live: boolean): PolicyDenial | undefined {
  return live ? undefined : deny('invalid_token', { token: 'task_ended', message: 'the token\'s task has ended' })
}
