// The local SnapshotStore: each workspace's snapshots are uncompressed tars plus a manifest in a
// directory of this host (TarSnapshots, snapshot-store.ts), read from and restored into host
// volumes (or streamed from and to an ArchivableVolume, a pod's /data). Good for one replica; replicas sharing a database need a shared store (a registry).
import type { Archiver } from './archiver.js'
import { RuntimeError } from './errors.js'
import { HostVolume } from './host-volume.js'
import { isArchivable, type SnapshotContent, type SnapshotFileEntry, type SnapshotReason, type SnapshotRecord, type SnapshotStore, type WorkspaceVolume } from './runtime.js'
import { tarContent } from './snapshot-content.js'
import { TarSnapshots } from './snapshot-store.js'

export class LocalSnapshotStore implements SnapshotStore {
  readonly #dirOf: (workspaceId: string) => string
  readonly #archiver: Archiver | undefined

  /** `dirOf` names the directory of a workspace's tars; `archiver` defaults as TarSnapshots' does. */
  constructor(dirOf: (workspaceId: string) => string, archiver?: Archiver) {
    this.#dirOf = dirOf
    this.#archiver = archiver
  }

  async put(volume: WorkspaceVolume, taskCount: number, reason: SnapshotReason): Promise<SnapshotRecord> {
    // A volume reached through its driver (a pod's /data): the driver streams the tar here.
    if (!(volume instanceof HostVolume) && isArchivable(volume)) return this.#tars(volume.workspaceId).createWith((file) => volume.archiveTo(file), taskCount, reason)
    const host = hostVolume(volume)
    return this.#tars(volume.workspaceId).create(host.hostDir, taskCount, reason, host.owner)
  }

  list(workspaceId: string): Promise<SnapshotRecord[]> {
    return this.#tars(workspaceId).list()
  }

  at(workspaceId: string, taskCount: number): Promise<SnapshotRecord | null> {
    return this.#tars(workspaceId).at(taskCount)
  }

  async entries(workspaceId: string, ref?: string): Promise<SnapshotFileEntry[]> {
    const tars = this.#tars(workspaceId)
    return tars.files(await tars.get(ref))
  }

  async content(record: SnapshotRecord, path: string): Promise<SnapshotContent> {
    return tarContent(this.#tars(record.workspaceId).file(record), path)
  }

  async restore(record: SnapshotRecord, into: WorkspaceVolume): Promise<void> {
    if (!(into instanceof HostVolume) && isArchivable(into)) return into.extractFrom(this.#tars(record.workspaceId).file(record))
    const host = hostVolume(into)
    return this.#tars(record.workspaceId).restore(record, host.hostDir, host.owner)
  }

  remove(workspaceId: string): Promise<void> {
    return this.#tars(workspaceId).remove()
  }

  #tars(workspaceId: string): TarSnapshots {
    return new TarSnapshots(this.#dirOf(workspaceId), workspaceId, this.#archiver)
  }
}

/** The local store reads and writes host directories only: a driver is built with a store its volumes fit. */
function hostVolume(volume: WorkspaceVolume): HostVolume {
  if (volume instanceof HostVolume) return volume
  throw new RuntimeError('runtime_unavailable', `the local snapshot store cannot reach the /data of workspace ${volume.workspaceId} (not a host directory)`)
}
