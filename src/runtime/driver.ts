// What a workspace driver implements (docs/design.md "How to add a runtime"): where workspaces
// run — their /data, the agent and its sandbox — and nothing about snapshots. DrivenRuntime
// (driven.ts) wraps a driver with the SnapshotStore and is what the lifecycle holds; a
// driver is built by its registration (registry.ts) and never by the rest of corral.
import type {
  AgentLaunch, AgentProcess, DriverCapabilities, ProvisionSpec, RuntimeCheck, SnapshotRecord, SnapshotStore, WorkspaceHandle, WorkspacePhase, WorkspaceVolume,
} from './runtime.js'

/** What a provision may restore a fork from: the snapshot store, read-only but for `restore`. */
export type ForkSource = Pick<SnapshotStore, 'at' | 'restore'>

export interface WorkspaceDriver<H extends WorkspaceHandle = WorkspaceHandle> {
  /** The registration's kind (registry.ts). */
  readonly kind: string
  /** False for the `process` driver: agents there run with the privileges of `corral serve`. */
  readonly isolated: boolean
  readonly capabilities: DriverCapabilities
  /** A real trial run of the driver's sandbox; serve refuses workspaces when not ok. */
  check(): Promise<RuntimeCheck>
  /**
   * Creates (or, after a crash, re-adopts) the workspace's /data; a fork's /data is restored from
   * `fork` into the new volume before the workspace exists (never over a re-adopted one).
   */
  provision(spec: ProvisionSpec, fork: ForkSource): Promise<H>
  /** Whether the workspace's /data exists (a host directory, a claim). */
  provisioned(workspaceId: string): Promise<boolean>
  /** The workspace's /data, as snapshot stores and uploads reach it. */
  volume(workspaceId: string): WorkspaceVolume
  /** Starts the agent inside the workspace; at most one agent per workspace at a time. */
  startAgent(workspaceId: string, launch: AgentLaunch): Promise<AgentProcess>
  /** Ends the running agent (grace period, then SIGKILL); resolves when it is gone. No-op when none runs. */
  stopAgent(workspaceId: string): Promise<void>
  /** After the stop snapshot `record`: tears down what holds the stopped workspace (a marker, its pods). */
  teardown(workspaceId: string, record: SnapshotRecord): Promise<void>
  /** Where the workspace is now, and its agent's host pid when there is one. */
  phase(workspaceId: string): Promise<{ phase: WorkspacePhase; pid?: number }>
  /** Stops the agent and deletes the workspace's /data and what holds it (a claim, its pods), never its snapshots. */
  release(workspaceId: string): Promise<void>
  /** Deletes the workspace's /data and whatever else the driver made for it (the snapshot store's files aside). */
  remove(workspaceId: string): Promise<void>
  /** Stops following agents (the local drivers stop them, without snapshots) and closes bridges. */
  close(): Promise<void>
}
