// Each driver wrapped with its snapshot store, as createRuntime builds it from its registration
// (src/runtime/registry.ts), for suites that need one driver's own options (a fake kube client,
// a bwrap path, cgroup detection) or its type (a local handle's dataDir).
import { DrivenRuntime, type DirectoryRuntime, type RuntimeOptions } from '../../src/runtime/index.js'
import { KubernetesRuntime, type KubernetesRuntimeOptions } from '../../src/runtime/kubernetes/index.js'
import { LocalRuntime, type LocalRuntimeOptions } from '../../src/runtime/local-runtime.js'
import { ProcessRuntime } from '../../src/runtime/process-runtime.js'

export type LocalRuntimeUnderTest = DrivenRuntime<LocalRuntime>
export type ProcessRuntimeUnderTest = DrivenRuntime<ProcessRuntime>
export type KubernetesRuntimeUnderTest = DrivenRuntime<KubernetesRuntime>
export type DirectoryRuntimeUnderTest = DrivenRuntime<DirectoryRuntime>

export const localRuntime = (options: LocalRuntimeOptions): LocalRuntimeUnderTest => new DrivenRuntime(new LocalRuntime(options), options)
export const processRuntime = (options: RuntimeOptions): ProcessRuntimeUnderTest => new DrivenRuntime(new ProcessRuntime(options), options)
export const kubernetesRuntime = (options: KubernetesRuntimeOptions): KubernetesRuntimeUnderTest => new DrivenRuntime(new KubernetesRuntime(options), options)
