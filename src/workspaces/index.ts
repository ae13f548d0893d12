// The workspace and task lifecycle's face (docs/design.md "Workspaces"): what serve builds and
// what the routes call. Other folders import from here, never from the files beside it.
export { WorkspaceService } from './service.js'
export type { Actor, TaskInput, TokenMinter, WorkspaceServiceOptions } from './options.js'
export { LeaseOwnership, SOLO_OWNERSHIP, type Claim, type Ownership, type OwnershipHooks, type ReplicaSeat } from './ownership.js'
export { AgentEvents, type AgentCallbackTarget } from './agent-callbacks.js'
export { TASK_LONG_POLL_MS, type PollToken, type TokenAhead } from './hand-over.js'
export { DEFAULT_TASK_TIMEOUT_SECONDS } from './task-runner.js'
export { DEFAULT_POOL_DEMAND_WINDOW_MS, DEFAULT_POOL_IDLE_SECONDS } from './warm-pools.js'
export { DEFAULT_DISK_CHECK_INTERVAL_MS } from './disk-quota.js'
export { agentEventViolation, packEventValidators, type PackEventValidators } from './agent-event-schemas.js'
export { DiskMeasureError, DiskWatch, diskOverText, measureDisk, type DiskUsage } from './disk-watch.js'
export { NO_PACKS, resolveWorkspacePacks, type PackSource, type WorkspacePackRecord, type WorkspacePacks } from './packs.js'
