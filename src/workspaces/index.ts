// The workspace and task lifecycle's face (docs/design.md "Workspaces"): what serve builds and
// what the routes call. Other folders import from here, never from the files beside it.
export {
  DEFAULT_DISK_CHECK_INTERVAL_MS, DEFAULT_POOL_DEMAND_WINDOW_MS, DEFAULT_POOL_IDLE_SECONDS, DEFAULT_TASK_TIMEOUT_SECONDS, TASK_LONG_POLL_MS,
  WorkspaceController, type Actor, type ControllerOptions, type PollToken, type TaskInput, type TokenAhead,
} from './controller.js'
export { AgentEvents } from './agent-callbacks.js'
export { agentEventViolation, packEventValidators, type PackEventValidators } from './agent-event-schemas.js'
export { DiskMeasureError, DiskWatch, diskOverText, measureDisk, type DiskUsage } from './disk-watch.js'
export { NO_PACKS, resolveWorkspacePacks, type PackSource, type WorkspacePackRecord, type WorkspacePacks } from './packs.js'
