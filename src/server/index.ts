// The HTTP API's face: buildApp(deps) and what a composition root needs to fill ServerDeps
// (configuration, identity, the first-start bootstrap, the logger). src/serve/ builds it.
export { buildApp } from './app.js'
export { bootstrap, createOwnerKey, type BootstrapResult } from './bootstrap.js'
export { oidcConfigFromEnv, serverConfigFromEnv } from './config.js'
export { BuiltinIdentityProvider, Identity, OidcIdentityProvider, type OidcConfig } from './identity/index.js'
export { createLogger } from './logger.js'
export { NO_LIFECYCLE, NO_WORKSPACE_CONTROL, NO_WORKSPACES } from './no-workspaces.js'
export type { ServerConfig, ServerDeps, WorkspaceDirectory, WorkspaceLifecycle } from './types.js'
export type { WorkspaceControl } from './workspace-control.js'
