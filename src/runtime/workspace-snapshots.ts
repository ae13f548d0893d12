// What every driver does with its SnapshotStore, written once (docs/runtime.md "Snapshot stores"):
// a snapshot of a provisioned workspace's /data, the stop shape (agent out, stop snapshot, then the
// driver's own teardown), and the read-only delegations (at, list, entries). A driver says how to
// tell that a workspace is provisioned and how to reach its /data; the store does the rest.
import { RuntimeError } from './errors.js'
import type { SnapshotContent, SnapshotFileEntry, SnapshotReason, SnapshotRecord, SnapshotStore, WorkspaceVolume } from './runtime.js'

export interface SnapshotSubject {
  /** Whether the workspace's /data exists (a host directory, a claim). */
  provisioned(workspaceId: string): Promise<boolean>
  /** The workspace's /data, as the store reaches it. */
  volume(workspaceId: string): WorkspaceVolume
}

export class WorkspaceSnapshots {
  readonly store: SnapshotStore
  readonly #subject: SnapshotSubject

  constructor(store: SnapshotStore, subject: SnapshotSubject) {
    this.store = store
    this.#subject = subject
  }

  /** Archives /data now; `workspace_not_found` when the workspace is not provisioned. */
  async take(workspaceId: string, taskCount: number, reason: SnapshotReason): Promise<SnapshotRecord> {
    if (!(await this.#subject.provisioned(workspaceId))) throw new RuntimeError('workspace_not_found', `workspace ${workspaceId} is not provisioned`)
    return this.store.put(this.#subject.volume(workspaceId), taskCount, reason)
  }

  /**
   * WorkspaceRuntime.stop's shape for every driver: the agent is stopped, the stop snapshot taken,
   * then `teardown` (a marker file, the workspace's pods) runs with the record.
   */
  async stop(workspaceId: string, taskCount: number, stopAgent: () => Promise<void>, teardown: (record: SnapshotRecord) => Promise<void>): Promise<SnapshotRecord> {
    await stopAgent()
    const record = await this.take(workspaceId, taskCount, 'stop')
    await teardown(record)
    return record
  }

  at(workspaceId: string, taskCount: number): Promise<SnapshotRecord | null> {
    return this.store.at(workspaceId, taskCount)
  }

  list(workspaceId: string): Promise<SnapshotRecord[]> {
    return this.store.list(workspaceId)
  }

  entries(workspaceId: string, ref?: string): Promise<SnapshotFileEntry[]> {
    return this.store.entries(workspaceId, ref)
  }

  /** One path of the latest snapshot (or of `ref`): `not_found` without a snapshot, `runtime_unavailable` for a store that cannot read one. */
  async content(workspaceId: string, path: string, ref?: string): Promise<SnapshotContent> {
    if (!this.store.content) throw new RuntimeError('runtime_unavailable', 'this snapshot store cannot read single files')
    const records = await this.store.list(workspaceId)
    const record = ref === undefined ? records.at(-1) : records.find((r) => r.ref === ref)
    if (!record) throw new RuntimeError('not_found', ref === undefined ? `workspace ${workspaceId} has no snapshot yet` : `snapshot ${ref} does not exist`, { workspace_id: workspaceId })
    return this.store.content(record, path)
  }

  async count(workspaceId: string): Promise<number> {
    return (await this.store.list(workspaceId)).length
  }
}
