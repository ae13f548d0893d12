// The runtime's public surface: the contract, the two drivers and a factory for `serve --runtime`.
import { LocalRuntime, type LocalRuntimeOptions } from './local-runtime.js'
import { ProcessRuntime } from './process-runtime.js'
import type { RuntimeKind, WorkspaceRuntime } from './runtime.js'

export * from './runtime.js'
export { RuntimeError } from './errors.js'
export { DEFAULT_MEASURE_TIMEOUT_MS, DiskMeasureError, measureDisk, type DiskUsage, type MeasureOptions } from './disk-usage.js'
export { HostVolume } from './host-volume.js'
export { LocalSnapshotStore } from './local-snapshot-store.js'
export { RegistrySnapshotStore, SNAPSHOT_MEDIA_TYPES, type OciClient, type OciDescriptor, type OciRef, type RegistrySnapshotStoreOptions, type TarVolume } from './registry-snapshot-store.js'
export type { DirectoryRuntime, HostWorkspaceHandle } from './directory-runtime.js'
export { defaultAgentCommand } from './layout.js'
export { limitsFromEnv, type WorkspaceLimits } from './limits.js'
export { LocalRuntime, type LocalRuntimeOptions } from './local-runtime.js'
export { NO_ISOLATION_WARNING, ProcessRuntime } from './process-runtime.js'

export function createRuntime(kind: RuntimeKind, options: LocalRuntimeOptions): WorkspaceRuntime {
  return kind === 'local' ? new LocalRuntime(options) : new ProcessRuntime(options)
}
