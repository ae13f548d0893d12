// The one component that owns snapshots (docs/runtime.md "Snapshot stores"): a driver wrapped with
// its SnapshotStore is the WorkspaceRuntime the lifecycle holds. A snapshot of a provisioned
// workspace's /data, the stop shape (agent out, stop snapshot, then the driver's teardown), fork
// restores and the read-only listings are written here once; a driver only says how to reach /data.
import { RuntimeError } from './errors.js'
import type { WorkspaceDriver } from './driver.js'
import { RuntimeLayout } from './layout.js'
import { LocalSnapshotStore } from './local-snapshot-store.js'
import type {
  AgentLaunch, AgentProcess, ProvisionSpec, DriverCapabilities, RuntimeCheck, RuntimeOptions, SnapshotContent, SnapshotFileEntry, SnapshotReason,
  SnapshotRecord, SnapshotStore, WorkspaceRuntime, WorkspaceStatus,
} from './runtime.js'

export class DrivenRuntime<D extends WorkspaceDriver = WorkspaceDriver> implements WorkspaceRuntime {
  readonly driver: D
  readonly store: SnapshotStore
  readonly capabilities: DriverCapabilities

  /** `options.snapshots`, else local tars under `<root>/snapshots` (LocalSnapshotStore). */
  constructor(driver: D, options: Pick<RuntimeOptions, 'root' | 'snapshots' | 'archiver'>) {
    this.driver = driver
    const layout = new RuntimeLayout(options.root)
    this.store = options.snapshots ?? new LocalSnapshotStore((id) => layout.snapshots(id), options.archiver)
    this.capabilities = driver.capabilities
  }

  get kind(): string {
    return this.driver.kind
  }

  get isolated(): boolean {
    return this.driver.isolated
  }

  check(): Promise<RuntimeCheck> {
    return this.driver.check()
  }

  provision(spec: ProvisionSpec): ReturnType<D['provision']> {
    return this.driver.provision(spec, this.store) as ReturnType<D['provision']>
  }

  startAgent(workspaceId: string, launch: AgentLaunch): Promise<AgentProcess> {
    return this.driver.startAgent(workspaceId, launch)
  }

  stopAgent(workspaceId: string): Promise<void> {
    return this.driver.stopAgent(workspaceId)
  }

  /** Archives /data now; `workspace_not_found` when the workspace is not provisioned. */
  async snapshot(workspaceId: string, taskCount: number, reason: SnapshotReason): Promise<SnapshotRecord> {
    if (!(await this.driver.provisioned(workspaceId))) throw new RuntimeError('workspace_not_found', `workspace ${workspaceId} is not provisioned`)
    return this.store.put(this.driver.volume(workspaceId), taskCount, reason)
  }

  async stop(workspaceId: string, taskCount: number): Promise<SnapshotRecord> {
    await this.driver.stopAgent(workspaceId)
    const record = await this.snapshot(workspaceId, taskCount, 'stop')
    await this.driver.teardown(workspaceId, record)
    return record
  }

  snapshotAt(workspaceId: string, taskCount: number): Promise<SnapshotRecord | null> {
    return this.store.at(workspaceId, taskCount)
  }

  snapshots(workspaceId: string): Promise<SnapshotRecord[]> {
    return this.store.list(workspaceId)
  }

  listSnapshotFiles(workspaceId: string, ref?: string): Promise<SnapshotFileEntry[]> {
    return this.store.entries(workspaceId, ref)
  }

  /** One path of the latest snapshot (or of `ref`): `not_found` without a snapshot, `runtime_unavailable` for a store that cannot read one. */
  async readSnapshot(workspaceId: string, path: string, ref?: string): Promise<SnapshotContent> {
    if (!this.store.content) throw new RuntimeError('runtime_unavailable', 'this snapshot store cannot read single files')
    const records = await this.store.list(workspaceId)
    const record = ref === undefined ? records.at(-1) : records.find((r) => r.ref === ref)
    if (!record) throw new RuntimeError('not_found', ref === undefined ? `workspace ${workspaceId} has no snapshot yet` : `snapshot ${ref} does not exist`, { workspace_id: workspaceId })
    return this.store.content(record, path)
  }

  async status(workspaceId: string): Promise<WorkspaceStatus> {
    const snapshots = (await this.store.list(workspaceId)).length
    const { phase, pid } = await this.driver.phase(workspaceId)
    return { workspaceId, phase, ...(pid === undefined ? {} : { pid }), snapshots }
  }

  placeFiles(workspaceId: string, into: readonly string[], from: string, names: readonly string[]): Promise<void> {
    return this.driver.volume(workspaceId).placeFiles(into, from, names)
  }

  release(workspaceId: string): Promise<void> {
    return this.driver.release(workspaceId)
  }

  async remove(workspaceId: string): Promise<void> {
    await this.driver.remove(workspaceId)
    await this.store.remove(workspaceId)
  }

  close(): Promise<void> {
    return this.driver.close()
  }
}
