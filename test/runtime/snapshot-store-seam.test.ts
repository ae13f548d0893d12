// The driver seam for issue 10 (docs/runtime.md "The driver interface"): a driver built with a
// SnapshotStore sends every snapshot, listing and fork restore through it, handing it volumes, not
// paths; the local store refuses a volume it cannot reach instead of guessing a path.
import { randomUUID } from 'node:crypto'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  HostVolume, LocalSnapshotStore, type SnapshotReason, type SnapshotRecord, type SnapshotStore, type WorkspaceVolume,
} from '../../src/runtime/index.js'
import { processRuntime } from './drivers.js'

/** The local store, recording each call and the kind of volume it was handed. */
class RecordingStore implements SnapshotStore {
  readonly calls: string[] = []
  constructor(readonly inner: SnapshotStore) {}
  put(volume: WorkspaceVolume, taskCount: number, reason: SnapshotReason) {
    this.calls.push(`put ${volume.workspaceId} ${taskCount} ${reason} ${volume instanceof HostVolume}`)
    return this.inner.put(volume, taskCount, reason)
  }
  list(workspaceId: string) {
    this.calls.push(`list ${workspaceId}`)
    return this.inner.list(workspaceId)
  }
  at(workspaceId: string, taskCount: number) {
    this.calls.push(`at ${workspaceId} ${taskCount}`)
    return this.inner.at(workspaceId, taskCount)
  }
  entries(workspaceId: string, ref?: string) {
    this.calls.push(`entries ${workspaceId}`)
    return this.inner.entries(workspaceId, ref)
  }
  restore(record: SnapshotRecord, into: WorkspaceVolume) {
    this.calls.push(`restore ${record.workspaceId} into ${into.workspaceId}`)
    return this.inner.restore(record, into)
  }
  remove(workspaceId: string) {
    this.calls.push(`remove ${workspaceId}`)
    return this.inner.remove(workspaceId)
  }
}

describe('SnapshotStore seam', () => {
  let root: string
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'corral-seam-'))
  })
  afterAll(async () => {
    await rm(root, { recursive: true, force: true })
  })

  it('a driver built with a store snapshots, lists and restores a fork through it', async () => {
    const store = new RecordingStore(new LocalSnapshotStore((id) => join(root, 'snaps', id)))
    const runtime = processRuntime({ root: join(root, 'rt'), proxy: { host: '127.0.0.1', port: 1 }, warn: () => {}, snapshots: store })
    const parent = `ws_p_${randomUUID().slice(0, 8)}`
    const child = `ws_c_${randomUUID().slice(0, 8)}`
    const ws = await runtime.provision({ workspaceId: parent })
    await writeFile(join(ws.dataDir, 'notes.md'), 'kept\n')
    const snap = await runtime.snapshot(parent, 1, 'task')
    expect((await runtime.listSnapshotFiles(parent)).map((e) => e.path)).toEqual(['notes.md'])
    const fork = await runtime.provision({ workspaceId: child, forkFrom: { workspaceId: parent, taskCount: 1 } })
    expect(fork.restoredFrom).toEqual(snap)
    expect(await readFile(join(fork.dataDir, 'notes.md'), 'utf8')).toBe('kept\n')
    expect(store.calls).toEqual([`put ${parent} 1 task true`, `entries ${parent}`, `at ${parent} 1`, `restore ${parent} into ${child}`])
    await runtime.close()
  })

  it('the local store refuses a volume that is not a host directory, and writes nothing', async () => {
    const local = new LocalSnapshotStore((id) => join(root, 'snaps2', id))
    const remote: WorkspaceVolume = { workspaceId: 'ws_remote', usage: async () => ({ usedBytes: 0 }), placeFiles: async () => {} }
    await expect(local.put(remote, 1, 'task')).rejects.toMatchObject({ code: 'runtime_unavailable' })
    expect(await local.list('ws_remote')).toEqual([])
  })
})
