import { randomUUID } from 'node:crypto'
import { chmod, mkdir, mkdtemp, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { gnuTar, nodeTar } from '../../src/runtime/archiver.js'
import { readTarIndex } from '../../src/runtime/snapshot-store.js'
import { processRuntime, type DirectoryRuntimeUnderTest, type ProcessRuntimeUnderTest } from './drivers.js'

// Snapshots are driver-independent (DirectoryRuntimeUnderTest); the process driver exercises them without
// needing bubblewrap. Both tar implementations run the same round-trips.
describe.each([gnuTar, nodeTar])('snapshots and forks with $name', (archiver) => {
  let root: string
  let runtime: ProcessRuntimeUnderTest

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'corral-snap-'))
    runtime = processRuntime({ root, proxy: { host: '127.0.0.1', port: 1 }, warn: () => {}, archiver })
  })
  afterAll(async () => {
    await runtime.close()
    await rm(root, { recursive: true, force: true })
  })

  const id = (p: string): string => `ws_${p}_${randomUUID().slice(0, 8)}`

  it('lists a snapshot from its headers: paths, sizes, dirs, mtimes, read-only bits, mime types', async () => {
    const ws = await runtime.provision({ workspaceId: id('list') })
    await mkdir(join(ws.dataDir, 'uploads/task_1'), { recursive: true })
    await writeFile(join(ws.dataDir, 'uploads/task_1/report.csv'), 'a,b\n1,2\n')
    await writeFile(join(ws.dataDir, 'notes.md'), '# notes\n')
    await chmod(join(ws.dataDir, 'notes.md'), 0o444)
    const long = `${'deep/'.repeat(30)}file-with-a-long-name.json`
    await mkdir(join(ws.dataDir, long, '..'), { recursive: true })
    await writeFile(join(ws.dataDir, long), '{}')
    await writeFile(join(ws.dataDir, 'blob'), Buffer.alloc(70_000, 7))
    const when = new Date('2026-03-04T05:06:07Z')
    await utimes(join(ws.dataDir, 'notes.md'), when, when)

    const precise = new Date(1_772_600_767_123)
    await writeFile(join(ws.dataDir, 'precise.txt'), 'ms')
    await utimes(join(ws.dataDir, 'precise.txt'), precise, precise)

    const snap = await runtime.snapshot(ws.workspaceId, 1, 'task')
    const files = await runtime.listSnapshotFiles(ws.workspaceId)
    const byPath = new Map(files.map((f) => [f.path, f]))
    expect(byPath.get('notes.md')).toEqual({ path: 'notes.md', size: 8, is_dir: false, mtime: when.getTime() / 1000, readonly: true, mime_type: 'text/markdown' })
    expect(byPath.get('uploads')).toMatchObject({ is_dir: true, size: 0, readonly: false })
    expect(byPath.get('uploads/task_1/report.csv')).toMatchObject({ size: 8, is_dir: false, mime_type: 'text/csv' })
    expect(byPath.get(long)).toMatchObject({ size: 2, mime_type: 'application/json' })
    expect(byPath.get('blob')).toMatchObject({ size: 70_000 })
    expect(byPath.get('blob')).not.toHaveProperty('mime_type')
    // pax (GNU tar) keeps milliseconds; a ustar header (the tar package) holds whole seconds.
    expect(byPath.get('precise.txt')!.mtime).toBe(archiver.name === 'gnu-tar' ? 1_772_600_767.123 : 1_772_600_767)
    const blobMtime = (await stat(join(ws.dataDir, 'blob'))).mtimeMs / 1000
    expect(Math.abs(byPath.get('blob')!.mtime - blobMtime)).toBeLessThan(1)
    // The same listing by ref, and an unknown ref is not found.
    expect(await runtime.listSnapshotFiles(ws.workspaceId, snap.ref)).toEqual(files)
    await expect(runtime.listSnapshotFiles(ws.workspaceId, `${ws.workspaceId}/nope.tar`)).rejects.toMatchObject({ code: 'not_found', status: 404 })
  })

  it('has no snapshot before the first one (not found), and an empty workspace snapshots to an empty listing', async () => {
    const ws = await runtime.provision({ workspaceId: id('empty') })
    await expect(runtime.listSnapshotFiles(ws.workspaceId)).rejects.toMatchObject({ code: 'not_found' })
    await runtime.stop(ws.workspaceId, 0)
    expect(await runtime.listSnapshotFiles(ws.workspaceId)).toEqual([])
    expect((await runtime.status(ws.workspaceId)).phase).toBe('stopped')
  })

  it('forks at N from the snapshot taken after N tasks, with contents and mtimes; 0 is the empty workspace', async () => {
    const parent = await runtime.provision({ workspaceId: id('parent') })
    const t1 = new Date('2026-01-01T00:00:01Z')
    await writeFile(join(parent.dataDir, 'a.txt'), 'after task 1')
    await utimes(join(parent.dataDir, 'a.txt'), t1, t1)
    const first = await runtime.snapshot(parent.workspaceId, 1, 'task')
    await writeFile(join(parent.dataDir, 'a.txt'), 'after task 2')
    await writeFile(join(parent.dataDir, 'b.txt'), 'only in 2')
    await runtime.snapshot(parent.workspaceId, 2, 'task')
    await writeFile(join(parent.dataDir, 'c.txt'), 'after stop')
    await runtime.stop(parent.workspaceId, 2)

    const at1 = await runtime.provision({ workspaceId: id('fork1'), forkFrom: { workspaceId: parent.workspaceId, taskCount: 1 } })
    expect(at1.restoredFrom).toEqual(first)
    expect(await readFile(join(at1.dataDir, 'a.txt'), 'utf8')).toBe('after task 1')
    expect((await stat(join(at1.dataDir, 'a.txt'))).mtime).toEqual(t1)
    await expect(stat(join(at1.dataDir, 'b.txt'))).rejects.toMatchObject({ code: 'ENOENT' })

    // At 2 the after-task snapshot wins over the later stop snapshot at the same count.
    const at2 = await runtime.provision({ workspaceId: id('fork2'), forkFrom: { workspaceId: parent.workspaceId, taskCount: 2 } })
    expect(await readFile(join(at2.dataDir, 'b.txt'), 'utf8')).toBe('only in 2')
    await expect(stat(join(at2.dataDir, 'c.txt'))).rejects.toMatchObject({ code: 'ENOENT' })

    const at0 = await runtime.provision({ workspaceId: id('fork0'), forkFrom: { workspaceId: parent.workspaceId, taskCount: 0 } })
    expect(at0.restoredFrom).toBeNull()
    expect(await readTarIndexOfDir(at0.dataDir)).toEqual([])

    await expect(runtime.provision({ workspaceId: id('fork9'), forkFrom: { workspaceId: parent.workspaceId, taskCount: 9 } }))
      .rejects.toMatchObject({ code: 'not_found', details: { fork_point_task_count: 9 } })

    // The parent is untouched and its records carry their task counts in order.
    expect((await runtime.snapshots(parent.workspaceId)).map((s) => [s.taskCount, s.reason])).toEqual([[1, 'task'], [2, 'task'], [2, 'stop']])
  })

  it('re-adopts a provisioned workspace after a restart and rejects ids that could escape the root', async () => {
    const ws = await runtime.provision({ workspaceId: id('adopt') })
    await writeFile(join(ws.dataDir, 'kept'), 'yes')
    const again = await processRuntime({ root, proxy: { host: '127.0.0.1', port: 1 }, warn: () => {}, archiver }).provision({ workspaceId: ws.workspaceId })
    expect(again.dataDir).toBe(ws.dataDir)
    expect(await readFile(join(again.dataDir, 'kept'), 'utf8')).toBe('yes')
    await expect(runtime.provision({ workspaceId: '../etc' })).rejects.toMatchObject({ code: 'workspace_not_found' })
  })

  it('rejects a corrupt archive instead of listing garbage', async () => {
    const file = join(root, 'corrupt.tar')
    await writeFile(file, Buffer.alloc(512, 65))
    expect(() => readTarIndex(file)).toThrow(/corrupt tar header at byte 0/)
  })
})

async function readTarIndexOfDir(dir: string): Promise<string[]> {
  const { readdir } = await import('node:fs/promises')
  return readdir(dir)
}
