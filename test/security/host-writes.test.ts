// Issue 15 class 4: serve (root) must never write, read or remove outside a workspace through a
// link that the workspace made. /data is the agent's: every name in it may be a symbolic link to a
// host directory or file, a dangling link, or a hardlink to a host file. Here the test plays the
// agent and plants each kind of link at each component of each path that serve uses inside /data
// (task uploads, snapshot and fork restore, removal), then proves the host outside is unchanged.
// docs/security.md "No host write follows a workspace link".
import { execFileSync } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { existsSync, linkSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync, lstatSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { gnuTar, nodeTar } from '../../src/runtime/archiver.js'
import { TarSnapshots } from '../../src/runtime/snapshot-store.js'
import { testDialects } from '../helpers/dialects.js'
import { controllerRig, waitFor, type ControllerRig } from '../workspaces/harness.js'
import { processRuntime, type ProcessRuntimeUnderTest } from '../runtime/drivers.js'

let scratch: string
let outside: string
let outsideFile: string
const SECRET = 'host file, not the workspace\'s\n'

/** Every file below `dir` with its content, to compare before and after. */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {}
  const walk = (d: string, rel: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name)
      const st = lstatSync(p)
      if (st.isDirectory()) walk(p, `${rel}${name}/`)
      else out[`${rel}${name}`] = st.isSymbolicLink() ? `-> ${name}` : readFileSync(p, 'utf8')
    }
  }
  walk(dir, '')
  return out
}

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'corral-host-writes-'))
})
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

beforeEach(() => {
  // The host's side: a directory and a file the workspace must never touch.
  outside = join(scratch, `outside-${randomUUID().slice(0, 8)}`)
  mkdirSync(outside)
  outsideFile = join(outside, 'host.txt')
  writeFileSync(outsideFile, SECRET)
})

type Plant = { kind: string; make: (at: string) => void }
const dirLinks: Plant[] = [
  { kind: 'symlink to a host directory', make: (at) => symlinkSync(outside, at) },
  { kind: 'symlink to a host file', make: (at) => symlinkSync(outsideFile, at) },
  { kind: 'dangling symlink', make: (at) => symlinkSync(join(outside, 'not-yet'), at) },
  { kind: 'relative symlink climbing out', make: (at) => symlinkSync('../../../../../../../../../..' + outside, at) },
]
const fileLinks: Plant[] = [
  ...dirLinks,
  // Same file system (both under the scratch dir): a hardlink is possible here, as it would be
  // for an agent of the process runtime.
  { kind: 'hardlink to a host file', make: (at) => linkSync(outsideFile, at) },
  { kind: 'plain file already there', make: (at) => writeFileSync(at, 'agent file\n') },
]

describe('task uploads are placed without following a workspace link', () => {
  let runtime: ProcessRuntimeUnderTest
  let staging: string
  beforeEach(async () => {
    runtime = processRuntime({ root: join(scratch, `rt-${randomUUID().slice(0, 8)}`), proxy: { host: '127.0.0.1', port: 9 }, warn: () => {} })
    staging = join(scratch, `staging-${randomUUID().slice(0, 8)}`)
    mkdirSync(staging)
    writeFileSync(join(staging, 'notes.txt'), 'uploaded\n')
  })

  const cases: Array<{ component: string; plants: Plant[]; at: (data: string) => string; prepare?: (data: string) => void }> = [
    { component: '/data/uploads', plants: dirLinks, at: (d) => join(d, 'uploads') },
    { component: '/data/uploads/<task>', plants: dirLinks, at: (d) => join(d, 'uploads', 'task_x'), prepare: (d) => mkdirSync(join(d, 'uploads')) },
    { component: '/data/uploads/<task>/<file>', plants: fileLinks, at: (d) => join(d, 'uploads', 'task_x', 'notes.txt'), prepare: (d) => mkdirSync(join(d, 'uploads', 'task_x'), { recursive: true }) },
  ]
  for (const c of cases) {
    for (const plant of c.plants) {
      it(`${c.component} as a ${plant.kind}: refused, the host is unchanged`, async () => {
        const ws = await runtime.provision({ workspaceId: `ws_${randomUUID().slice(0, 8)}` })
        c.prepare?.(ws.dataDir)
        plant.make(c.at(ws.dataDir))
        const before = tree(outside)
        await expect(runtime.placeFiles(ws.workspaceId, ['uploads', 'task_x'], staging, ['notes.txt'])).rejects.toMatchObject({ code: 'unsafe_path' })
        expect(tree(outside)).toEqual(before)
        expect(readFileSync(outsideFile, 'utf8')).toBe(SECRET)
        expect(existsSync(join(outside, 'not-yet'))).toBe(false)
      })
    }
  }

  it('places the files when nothing is in the way, owned like the rest of /data', async () => {
    const ws = await runtime.provision({ workspaceId: `ws_${randomUUID().slice(0, 8)}` })
    await runtime.placeFiles(ws.workspaceId, ['uploads', 'task_x'], staging, ['notes.txt'])
    expect(readFileSync(join(ws.dataDir, 'uploads', 'task_x', 'notes.txt'), 'utf8')).toBe('uploaded\n')
  })

  it('/data itself replaced by a link: refused', async () => {
    const ws = await runtime.provision({ workspaceId: `ws_${randomUUID().slice(0, 8)}` })
    rmSync(ws.dataDir, { recursive: true })
    symlinkSync(outside, ws.dataDir)
    await expect(runtime.placeFiles(ws.workspaceId, ['uploads', 'task_x'], staging, ['notes.txt'])).rejects.toMatchObject({ code: 'unsafe_path' })
    expect(existsSync(join(outside, 'uploads'))).toBe(false)
  })
})

describe('snapshots, fork restores and removal never reach through a workspace link', () => {
  let runtime: ProcessRuntimeUnderTest
  beforeEach(() => {
    runtime = processRuntime({ root: join(scratch, `rt-${randomUUID().slice(0, 8)}`), proxy: { host: '127.0.0.1', port: 9 }, warn: () => {} })
  })

  function plantAll(data: string): void {
    mkdirSync(join(data, 'sub'))
    symlinkSync(outside, join(data, 'to-dir'))
    symlinkSync(outsideFile, join(data, 'to-file'))
    symlinkSync(join(outside, 'dangling'), join(data, 'dangling'))
    symlinkSync(outside, join(data, 'sub', 'to-dir'))
    linkSync(outsideFile, join(data, 'sub', 'hard'))
  }

  it('a snapshot archives links as links; a fork restores them as links and writes nothing outside', async () => {
    const parent = await runtime.provision({ workspaceId: `ws_${randomUUID().slice(0, 8)}` })
    plantAll(parent.dataDir)
    const before = tree(outside)
    await runtime.snapshot(parent.workspaceId, 1, 'task')
    const child = await runtime.provision({ workspaceId: `ws_${randomUUID().slice(0, 8)}`, forkFrom: { workspaceId: parent.workspaceId, taskCount: 1 } })
    expect(lstatSync(join(child.dataDir, 'to-dir')).isSymbolicLink()).toBe(true)
    expect(lstatSync(join(child.dataDir, 'sub', 'to-dir')).isSymbolicLink()).toBe(true)
    expect(tree(outside)).toEqual(before)
    expect(existsSync(join(outside, 'dangling'))).toBe(false)
  })

  for (const archiver of [gnuTar, nodeTar]) {
    it(`${archiver.name}: a restore of an archive with a link and then a member below it writes nothing outside`, async () => {
      // What a tampered snapshot could hold: `evil -> <outside>`, then `evil/pwned`.
      const a = join(scratch, `tar-${randomUUID().slice(0, 8)}`)
      mkdirSync(join(a, 'one'), { recursive: true })
      mkdirSync(join(a, 'two', 'evil'), { recursive: true })
      symlinkSync(outside, join(a, 'one', 'evil'))
      writeFileSync(join(a, 'two', 'evil', 'pwned'), 'x')
      const tar = join(a, 'evil.tar')
      execFileSync('tar', ['--create', '--file', tar, '--directory', join(a, 'one'), 'evil'])
      execFileSync('tar', ['--append', '--file', tar, '--directory', join(a, 'two'), 'evil/pwned'])
      const store = new TarSnapshots(join(a, 'snaps'), 'ws_evil', archiver)
      const target = join(a, 'restore')
      mkdirSync(target)
      mkdirSync(join(a, 'snaps'))
      writeFileSync(join(a, 'snaps', 'evil.tar'), readFileSync(tar))
      await store.restore({ ref: 'ws_evil/evil.tar', workspaceId: 'ws_evil', taskCount: 1, reason: 'task', createdAt: '', sizeBytes: 0 }, target).catch(() => {})
      expect(existsSync(join(outside, 'pwned'))).toBe(false)
    })
  }

  it('removing a workspace removes its links, never what they point at', async () => {
    const ws = await runtime.provision({ workspaceId: `ws_${randomUUID().slice(0, 8)}` })
    plantAll(ws.dataDir)
    const before = tree(outside)
    await runtime.remove(ws.workspaceId)
    expect(existsSync(ws.dataDir)).toBe(false)
    expect(tree(outside)).toEqual(before)
  })
})

// The observed attack end to end through the controller: task 1 makes /data/uploads a link to a
// host directory; task 2 brings an upload. Before the fix serve wrote it into the host directory.
for (const dialect of testDialects()) {
  describe(`${dialect.name}: a follow-up task's upload through a link made by the previous task`, () => {
    let rig: ControllerRig
    afterEach(async () => rig?.close())

    it('fails the task with upload_refused and writes nothing outside', async () => {
      rig = await controllerRig(await dialect.open())
      const { controller, orgId, actor, role } = rig
      const { workspace, task } = await controller.createWorkspace(orgId, actor, role, { description: `link uploads ${outside}`, options: {} })
      // The stand-in exits without task_end: its task ends when the agent has gone.
      await waitFor(async () => (await controller.get(orgId, workspace.id))?.task_count === 1, 'the linking task')
      await waitFor(async () => (await controller.get(orgId, workspace.id))?.state === 'idle', 'idle')
      const id = `task_${randomUUID().replaceAll('-', '')}`
      mkdirSync(controller.stagingDir(id), { recursive: true })
      writeFileSync(join(controller.stagingDir(id), 'notes.txt'), 'uploaded\n')
      const before = tree(outside)
      await controller.submitTask(orgId, actor, workspace.id, { id, description: 'write done.txt ok', options: {}, uploads: ['notes.txt'] })
      const done = await waitFor(async () => {
        const t = await controller.task(orgId, id)
        return t && ['failed', 'completed'].includes(t.status) ? t : undefined
      }, 'the upload task')
      expect(done).toMatchObject({ status: 'failed', reason: 'upload_refused' })
      expect(done.summary).toMatch(/\/data\/uploads is a link or not a directory/)
      expect(tree(outside)).toEqual(before)
      expect(existsSync(controller.stagingDir(id))).toBe(false)
    })
  })
}
