// The runtime's public surface: the contract, the drivers and factories for `serve --runtime`.
import { LocalRuntime, type LocalRuntimeOptions } from './local-runtime.js'
import { ProcessRuntime } from './process-runtime.js'
import type { RuntimeKind, WorkspaceRuntime } from './runtime.js'
import type { KubernetesRuntime, KubernetesRuntimeOptions } from './kubernetes/index.js'

export * from './runtime.js'
export { RuntimeError } from './errors.js'
export { DEFAULT_MEASURE_TIMEOUT_MS, DiskMeasureError, measureDisk, type DiskUsage, type MeasureOptions } from './disk-usage.js'
export { HostVolume } from './host-volume.js'
export { LocalSnapshotStore } from './local-snapshot-store.js'
export { RegistrySnapshotStore, SNAPSHOT_MEDIA_TYPES, type OciClient, type OciDescriptor, type OciRef, type RegistrySnapshotStoreOptions, type TarVolume } from './registry-snapshot-store.js'
export type { DirectoryRuntime, HostWorkspaceHandle } from './directory-runtime.js'
export { defaultAgentCommand } from './layout.js'
export { limitsFromEnv, type WorkspaceLimits } from './limits.js'
export { DEFAULT_SANDBOX_UID, LocalRuntime, type LocalRuntimeOptions } from './local-runtime.js'
export { NO_ISOLATION_WARNING, ProcessRuntime } from './process-runtime.js'

export { kubernetesSettingsFromEnv, type KubernetesSettings } from './kubernetes/options.js'
export type { AdoptedAgent, KubernetesRuntime, KubernetesRuntimeOptions } from './kubernetes/index.js'

export function createRuntime(kind: Exclude<RuntimeKind, 'kubernetes'>, options: LocalRuntimeOptions): WorkspaceRuntime {
  return kind === 'local' ? new LocalRuntime(options) : new ProcessRuntime(options)
}

/** The Kubernetes driver, its client library loaded only now (docs/kubernetes.md "Runtime"). */
export async function createKubernetesRuntime(options: KubernetesRuntimeOptions): Promise<KubernetesRuntime> {
  const { KubernetesRuntime: Driver } = await import('./kubernetes/index.js')
  return new Driver(options)
}
