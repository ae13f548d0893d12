// The /v1 wire shapes the console reads: the contract's, derived from the schemas the routes answer
// with (src/contract/wire.ts), taken as types only so no server code is bundled.
export type {
  AgentRoleJson as AgentRoleRecord, AuditEvent, ErrorBody as ErrorEnvelope, MeJson as Me, TaskJson as TaskRecord, WorkspaceJson as WorkspaceRecord,
  AuditOrder, SnapshotFileEntry, TaskLifecycleStatus, WorkspaceState,
} from '../contract/index.js'
