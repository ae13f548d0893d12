// The runtime's public surface: the contract, the registry of drivers (`serve --runtime`) and the
// snapshot stores. Drivers are reached only through their registration (registry.ts).
export * from './runtime.js'
export type { ForkSource, WorkspaceDriver } from './driver.js'
export { DrivenRuntime } from './driven.js'
export { createRuntime, isRuntimeKind, RUNTIME_KINDS, RUNTIMES, runtimeKindsHelp, runtimeSettings, type RuntimeKind, type RuntimeRegistration, type RuntimeSetup } from './registry.js'
export { RuntimeError } from './errors.js'
export { DEFAULT_MEASURE_TIMEOUT_MS, DiskMeasureError, measureDisk, type DiskUsage, type MeasureOptions } from './disk-usage.js'
export { HostVolume } from './host-volume.js'
export { LocalSnapshotStore } from './local-snapshot-store.js'
export { RegistrySnapshotStore, SNAPSHOT_MEDIA_TYPES, type OciClient, type OciDescriptor, type OciRef, type RegistrySnapshotStoreOptions, type TarVolume } from './registry-snapshot-store.js'
export type { DirectoryRuntime, HostWorkspaceHandle } from './directory-runtime.js'
export { defaultAgentCommand } from './layout.js'
export { limitsFromEnv, type WorkspaceLimits } from './limits.js'
export { DEFAULT_SANDBOX_UID } from './sandbox-args.js'
export type { LocalRuntimeOptions } from './local-runtime.js'

export { kubernetesSettingsFromEnv, type KubernetesSettings } from './kubernetes/options.js'
export type { AdoptedAgent, KubernetesRuntime, KubernetesRuntimeOptions } from './kubernetes/index.js'
