// The configuration services the provider and agent-role routes call: each takes the server's
// dependencies and the caller, does the checks, the store writes and the audit event, and returns
// what the route renders.
export {
  archiveAgentRole,
  createAgentRole,
  deleteAgentRole,
  getAgentRole,
  listAgentRoles,
  stopRoleWorkspaces,
  unarchiveAgentRole,
  updateAgentRole,
  type SavedAgentRole,
} from './agent-roles.js'
export { type MaterialWarning, missingMaterial, namedMaterial } from './material-warnings.js'
export { type ConfigCaller, type ConfigDeps, configCaller, configMutation, restartIdleWorkspaces } from './events.js'
export {
  type ProviderCreate,
  archiveProvider,
  createProvider,
  deleteProvider,
  getProvider,
  listProviders,
  unarchiveProvider,
  updateProvider,
} from './providers.js'
