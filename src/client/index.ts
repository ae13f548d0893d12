// Public surface of the /v1 client.
export { CorralClient, normalizeApiUrl, type ClientOptions, type RequestOptions, type QueryValue } from './client.js'
export { ApiError, ApiConnectionError, apiErrorFrom, parseRetryAfter, type ErrorEnvelope } from './errors.js'
export { followActivity, type FollowOptions } from './activity-stream.js'
export { proxyAccessApi, type MintedProxyToken, type ProxyCa } from './proxy-access.js'
export { snapshotContent, type SnapshotContentAnswer } from './snapshot-content.js'
export { agentLogs, followAgentLogs, type AgentLogChunk, type AgentLogPage, type FollowLogsOptions } from './workspace-logs.js'
export { parseFilter, FilterSyntaxError, type AuditFilter } from './filter.js'
export { resolveTime } from './time.js'
export * from './types.js'
export { packsApi, pickByName, PACK_ID_PREFIX, PACK_NAME_RE, type PacksApi, type PackRecord, type PackUpdate, type ArchiveSource, type UploadProgress } from './packs.js'
export { rolesApi, type RolesApi, type AgentRoleInput, type AgentRoleRecord, type ProviderInput, type ProviderRecord, type RoleWarning } from './roles.js'
export {
  workspacesApi,
  TERMINAL_TASK_STATUSES,
  type SnapshotFileEntry,
  type TaskAccepted,
  type TaskRecord,
  type TaskSubmission,
  type WorkspaceRecord,
} from './workspaces.js'
