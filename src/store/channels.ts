// Notify channels more than one part speaks on (the store carries them: NOTIFY on Postgres, an
// in-process emitter on SQLite), named once here so neither side imports the other.

/** A workspace was stopped or archived (payload: its id); every proxy process deactivates it. */
export const WORKSPACE_STOPPED_CHANNEL = 'corral_workspace_stopped'

/** A task ended (payload: `<workspace id>/<task id>`); every proxy stops taking its token. */
export const TASK_ENDED_CHANNEL = 'corral_task_ended'

/** Reconcile this workspace (payload: its id): a replica asks the lease owner to act on a change it wrote. */
export const WORKSPACE_KICK_CHANNEL = 'corral_workspace_kick'

/** A provider or agent role of an org changed (payload: the org id): proxies load its workspaces' policies again. */
export const ROLES_CHANGED_CHANNEL = 'corral_roles_changed'
