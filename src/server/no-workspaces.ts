// The workspace part's values for an app that runs no workspace lifecycle (an API-only app, as the
// route tests build): no workspace exists, nothing can be started. `serve` always passes real ones.
import type { WorkspaceControl } from './workspace-control.js'
import type { WorkspaceDirectory, WorkspaceLifecycle } from './types.js'

/** Every workspace id is not found. */
export const NO_WORKSPACES: WorkspaceDirectory = Object.freeze({ get: async () => undefined })

/** Roles and providers see no workspaces using them. */
export const NO_WORKSPACE_CONTROL: WorkspaceControl = Object.freeze({
  activeCount: async () => 0,
  stopForRole: async () => 0,
  restartIdleForRole: async () => 0,
})

export const NO_LIFECYCLE: WorkspaceLifecycle = Object.freeze({ available: false, reason: 'this server runs no workspace controller', controller: null })
