// The runtimes `serve --runtime` can run workspaces on: one registration per driver, keyed by kind
// (docs/design.md "How to add a runtime"). A registration says what the kind is, reads its own
// settings at start and builds its driver; createRuntime wraps the driver with the snapshot store.
// Each driver's code loads only when it is built (the Kubernetes client costs about half a second
// to load, which no other runtime should pay).
import { DrivenRuntime } from './driven.js'
import type { WorkspaceDriver } from './driver.js'
import { kubernetesSettingsFromEnv } from './kubernetes/options.js'
import type { WorkspaceLimits } from './limits.js'
import type { LocalRuntimeOptions } from './local-runtime.js'

/** What serve hands every driver (the local drivers' options), and the registration's own settings. */
export interface RuntimeSetup<S = unknown> extends LocalRuntimeOptions {
  settings: S
}

export interface RuntimeRegistration<S = unknown> {
  /** What the kind is, in a few words (the `--runtime` flag's help). */
  readonly summary: string
  /** Its settings from the environment, read once at start: a bad value refuses the start. */
  settings(env: NodeJS.ProcessEnv, limits: WorkspaceLimits): S
  /** Builds the driver, loading its code only now. */
  create(setup: RuntimeSetup<S>): Promise<WorkspaceDriver>
}

const register = <S>(registration: RuntimeRegistration<S>): RuntimeRegistration<S> => registration
const none = (): undefined => undefined

export const RUNTIMES = {
  local: register({ summary: 'bubblewrap sandbox', settings: none, create: async (o) => new (await import('./local-runtime.js')).LocalRuntime(o) }),
  process: register({ summary: 'no isolation, development only', settings: none, create: async (o) => new (await import('./process-runtime.js')).ProcessRuntime(o) }),
  kubernetes: register({ summary: 'a pod per workspace, docs/kubernetes.md', settings: kubernetesSettingsFromEnv, create: async (o) => new (await import('./kubernetes/index.js')).KubernetesRuntime(o) }),
}

export type RuntimeKind = keyof typeof RUNTIMES
export const RUNTIME_KINDS = Object.keys(RUNTIMES) as RuntimeKind[]

export function isRuntimeKind(kind: string): kind is RuntimeKind {
  return Object.hasOwn(RUNTIMES, kind)
}

/** `--runtime`'s help: every kind with its summary. */
export function runtimeKindsHelp(): string {
  const kinds = RUNTIME_KINDS.map((kind) => `${kind} (${RUNTIMES[kind].summary})`)
  return kinds.length > 1 ? `${kinds.slice(0, -1).join(', ')} or ${kinds.at(-1)}` : kinds.join('')
}

/** The registration's settings for `kind` (undefined for a kind that has none). */
export function runtimeSettings(kind: RuntimeKind, env: NodeJS.ProcessEnv, limits: WorkspaceLimits): unknown {
  return (RUNTIMES[kind] as RuntimeRegistration).settings(env, limits)
}

/** The driver of `kind`, built from its registration, wrapped with its snapshot store (options.snapshots, else local tars). */
export async function createRuntime(kind: RuntimeKind, setup: RuntimeSetup): Promise<DrivenRuntime> {
  const driver = await (RUNTIMES[kind] as RuntimeRegistration).create(setup)
  return new DrivenRuntime(driver, setup)
}
