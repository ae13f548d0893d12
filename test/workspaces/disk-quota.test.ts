// The disk quota as the host enforces it (docs/runtime.md "Resource limits"): the controller
// measures /data while a task runs and when it ends, whatever the agent reports. The agent here is
// a small script that never mentions the quota: it writes 64 KiB files (each far under any
// per-file limit), leaves a `done-<task>` marker, then waits for a `go` file before exiting.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync, linkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { AuditEvent } from '../../src/contract/index.js'
import { DiskMeasureError, DiskWatch, diskOverText, measureDisk, type DiskUsage } from '../../src/workspaces/disk-watch.js'
import { testDialects } from '../helpers/dialects.js'
import { controllerRig, handTask, waitFor, warmClaims, type ControllerRig, type RigOptions } from './harness.js'

const FILLER_AGENT = `
const fs = require('node:fs'), path = require('node:path')
const dir = process.env.CORRAL_WORKSPACE_DIR
// A warm pool member's agent (as the stand-in does): the test drops the fetched task in task.json.
const warm = process.env.CORRAL_TASK_SOURCE === 'http'
if (warm) fs.writeFileSync(path.join(dir, 'warm.token'), process.env.CORRAL_PROXY_TOKEN || '')
if (warm) fs.writeFileSync(path.join(dir, 'warm.pid'), String(process.pid))
while (warm && !fs.existsSync(path.join(dir, 'task.json'))) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20)
const [task] = warm ? [JSON.parse(fs.readFileSync(path.join(dir, 'task.json'), 'utf8'))] : JSON.parse(fs.readFileSync(path.join(process.env.CORRAL_INBOX, 'tasks.json'), 'utf8'))
const [verb, n] = task.description.split(' ')
if (verb === 'fill') {
  fs.mkdirSync(path.join(dir, 'fill'), { recursive: true })
  for (let i = 0; i < Number(n); i++) fs.writeFileSync(path.join(dir, 'fill', task.id + '-' + i), Buffer.alloc(65536, 1))
} else if (verb === 'deep') {
  // Past PATH_MAX (4096) from /data: 21 directories with 200-character names, entered one by one.
  process.chdir(dir)
  for (let i = 0; i < 21; i++) {
    const name = String(i).padStart(200, 'd')
    fs.mkdirSync(name)
    process.chdir(name)
  }
  for (let i = 0; i < Number(n); i++) fs.writeFileSync(task.id + '-' + i, Buffer.alloc(65536, 1))
} else if (verb === 'clean') {
  fs.rmSync(path.join(dir, 'fill'), { recursive: true, force: true })
} else if (verb === 'fill-and-more-on-stop') {
  // Fills, then writes 1 MiB more when told to stop: what an agent writes between the check that
  // caught it and its death must count in the next task's baseline.
  fs.mkdirSync(path.join(dir, 'fill'), { recursive: true })
  for (let i = 0; i < Number(n); i++) fs.writeFileSync(path.join(dir, 'fill', task.id + '-' + i), Buffer.alloc(65536, 1))
  process.on('SIGTERM', () => {
    for (let i = 0; i < 16; i++) fs.writeFileSync(path.join(dir, 'fill', task.id + '-more-' + i), Buffer.alloc(65536, 1))
    process.exit(0)
  })
} else if (verb === 'clean-later') {
  // Several checks pass while /data is still as the last task left it, then it deletes the files.
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, Number(n))
  fs.rmSync(path.join(dir, 'fill'), { recursive: true, force: true })
}
fs.writeFileSync(path.join(dir, 'done-' + task.id), '')
const timer = setInterval(() => {
  if (!fs.existsSync(path.join(dir, 'go'))) return
  fs.rmSync(path.join(dir, 'go'))
  clearInterval(timer)
}, 20)
`

const MIB = 1024 * 1024

for (const dialect of testDialects()) {
  describe(`disk quota on the host (${dialect.name})`, () => {
    let rig: ControllerRig | undefined
    afterEach(async () => {
      await rig?.close()
      rig = undefined
    })

    const setup = async (opts: RigOptions) => (rig = await controllerRig(await dialect.open(), { agentCommand: [process.execPath, '-e', FILLER_AGENT], ...opts }))
    const task = (r: ControllerRig, id: string) => r.store.workspaces.tasks.byId(id)
    const settled = (r: ControllerRig, id: string) => waitFor(async () => { const t = await task(r, id); return t && t.status !== 'running' && t.status !== 'submitted' && t }, 'task settled')
    const idleAfter = (r: ControllerRig, id: string, count: number) => waitFor(async () => { const w = await r.store.workspaces.byId(id); return w?.state === 'idle' && w.task_count === count && w }, `idle after ${count} tasks`)
    const dataDir = (r: ControllerRig, id: string) => join(r.root, 'runtime', 'workspaces', id, 'data')
    const agentDone = (r: ControllerRig, ws: string, taskId: string) => waitFor(async () => existsSync(join(dataDir(r, ws), `done-${taskId}`)), 'the agent wrote its files')
    const taskEnd = async (r: ControllerRig, ws: string, taskId: string, summary: string) => {
      const reply = await r.events.handle({ org_id: r.orgId, workspace_id: ws, task_id: taskId, exp: 0 }, 'POST', `/task/${taskId}/event`,
        Buffer.from(JSON.stringify({ type: 'task_end', status: 'completed', summary })))
      expect(reply.status).toBe(202)
    }
    // The second task of a workspace deletes what the first left over the quota and completes.
    const cleanUpCompletes = async (r: ControllerRig, ws: string, description: string) => {
      const next = await r.controller.submitTask(r.orgId, r.actor, ws, { description, options: {} })
      await agentDone(r, ws, next.id)
      await taskEnd(r, ws, next.id, 'cleaned up')
      expect(await settled(r, next.id)).toMatchObject({ status: 'completed', summary: 'cleaned up' })
      writeFileSync(join(dataDir(r, ws), 'go'), '')
      await idleAfter(r, ws, 2)
    }
    const completions = async (r: ControllerRig, ws: string): Promise<AuditEvent[]> => {
      await r.audit.flush()
      return (await r.store.audit.page(r.orgId, { filters: [], workspaceId: ws, order: 'asc', limit: 1000 })).filter((e) => e.event_type === 'task_completed')
    }

    it('fails the task of an agent that writes past the quota without saying so; the snapshot is taken, the workspace goes idle, and the next task can clean up', async () => {
      const r = await setup({ disk: { quotaMb: 1, intervalMs: 50 } })
      // 32 × 64 KiB = 2 MiB of files, none of them near the quota; the agent then waits forever.
      const { workspace, task: t } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'fill 32', options: {} })
      const failed = await settled(r, t!.id)
      expect(failed).toMatchObject({ status: 'failed', reason: 'disk_quota_exceeded' })
      // Caught while the agent writes: somewhere past 1 MiB, at most the 2 MiB it means to write.
      const used = Number(/^The workspace directory uses (\d+\.\d+) MB, over its disk quota of 1\.0+ MB\.$/.exec(failed.summary ?? '')?.[1])
      expect(used).toBeGreaterThan(1)
      expect(used).toBeLessThanOrEqual(2.1)

      // The agent is stopped; its exit snapshots /data (the evidence) and the workspace is idle.
      await idleAfter(r, workspace.id, 1)
      const files = await r.controller.snapshotFiles(r.orgId, workspace.id)
      expect(files.filter((f) => f.path.startsWith('fill/') && !f.is_dir).length).toBeGreaterThanOrEqual(16)
      expect((await completions(r, workspace.id)).map((e) => e.detail)).toEqual([
        expect.objectContaining({ status: 'failed', reason: 'disk_quota_exceeded' }),
      ])

      // A follow-up task runs in the same /data (over the quota at its start) and deletes the files.
      await cleanUpCompletes(r, workspace.id, 'clean')
    })

    it('measures /data again once a stopped agent is gone: what it wrote after the check that caught it is the next task\'s baseline', async () => {
      const r = await setup({ disk: { quotaMb: 1, intervalMs: 50 } })
      // 20 × 64 KiB = 1.25 MiB: caught over the quota; on SIGTERM the agent writes 1 MiB more.
      const { workspace, task: t } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'fill-and-more-on-stop 20', options: {} })
      expect(await settled(r, t!.id)).toMatchObject({ status: 'failed', reason: 'disk_quota_exceeded' })
      await idleAfter(r, workspace.id, 1)
      await expect(measureDisk(dataDir(r, workspace.id)).then((u) => u.usedBytes)).resolves.toBeGreaterThan(2 * MIB)
      // The follow-up starts at ~2.25 MiB and deletes only after 800 ms (16 checks at 50 ms): it is
      // not failed for what the previous agent left, and ends under the quota.
      await cleanUpCompletes(r, workspace.id, 'clean-later 800')
    })

    it('lets an agent under the quota complete normally, with its watch running while the task does', async () => {
      const r = await setup({ disk: { quotaMb: 1, intervalMs: 20 } })
      const { workspace, task: t } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'fill 4', options: {} })
      await agentDone(r, workspace.id, t!.id)
      expect(r.controller.watchingDisk(workspace.id)).toBe(true)
      await taskEnd(r, workspace.id, t!.id, 'wrote 256 KiB')
      expect(await settled(r, t!.id)).toMatchObject({ status: 'completed', summary: 'wrote 256 KiB' })
      writeFileSync(join(dataDir(r, workspace.id), 'go'), '')
      await idleAfter(r, workspace.id, 1)
      expect(r.controller.watchingDisk(workspace.id)).toBe(false)
      const [done] = await completions(r, workspace.id)
      expect(done!.detail).toMatchObject({ status: 'completed' })
      expect(done!.detail).not.toHaveProperty('reason')
    })

    it('measures once more when the task ends: task_end `completed` over the quota fails, and so does an exit without task_end', async () => {
      // No periodic check comes during this test: only the end-of-task measurement can catch it.
      const r = await setup({ disk: { quotaMb: 1, intervalMs: 600_000 } })
      const { workspace, task: t } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'fill 24', options: {} })
      await agentDone(r, workspace.id, t!.id)
      await taskEnd(r, workspace.id, t!.id, 'all good')
      const failed = await settled(r, t!.id)
      expect(failed).toMatchObject({ status: 'failed', reason: 'disk_quota_exceeded' })
      expect(failed.summary).toMatch(/^The workspace directory uses 1\.[5-6] MB, over its disk quota of 1\.0 MB\. The agent reported: all good$/)
      writeFileSync(join(dataDir(r, workspace.id), 'go'), '')
      await idleAfter(r, workspace.id, 1)

      // The agent exits without task_end while /data is over: the quota is the reason, not the exit.
      const next = await r.controller.submitTask(r.orgId, r.actor, workspace.id, { description: 'fill 1', options: {} })
      await agentDone(r, workspace.id, next.id)
      writeFileSync(join(dataDir(r, workspace.id), 'go'), '')
      expect(await settled(r, next.id)).toMatchObject({ status: 'failed', reason: 'disk_quota_exceeded' })
      await idleAfter(r, workspace.id, 2)
    })

    it('watches the task of a claimed warm pool member, whose agent was started before the task', async () => {
      const r = await setup({ disk: { quotaMb: 1, intervalMs: 50 }, poolSize: 1 })
      const member = await waitFor(async () => (await r.store.workspaces.list(r.orgId, { state: ['idle'] })).find((w) => w.pooled), 'a pooled idle workspace')
      await waitFor(async () => existsSync(join(dataDir(r, member.id), 'warm.pid')), 'the warm agent waiting')
      const { workspace, task: t } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'fill 32', options: {} })
      expect(workspace.id).toBe(member.id)
      const reply = await r.events.handle(await warmClaims(r, dataDir(r, member.id)), 'GET', '/tasks/next', Buffer.alloc(0))
      expect(reply.status).toBe(200)
      handTask(dataDir(r, member.id), reply.body)
      expect(await settled(r, t!.id)).toMatchObject({ status: 'failed', reason: 'disk_quota_exceeded' })
      expect(await idleAfter(r, member.id, 1)).toMatchObject({ pooled: false })
    })

    it('takes a warm claim\'s baseline before its agent has the task: 2 MiB written right after the hand-over fail it while it runs', async () => {
      const r = await setup({ disk: { quotaMb: 1, intervalMs: 50 }, poolSize: 1 })
      const member = await waitFor(async () => (await r.store.workspaces.list(r.orgId, { state: ['idle'] })).find((w) => w.pooled), 'a pooled idle workspace')
      await waitFor(async () => existsSync(join(dataDir(r, member.id), 'warm.pid')), 'the warm agent waiting')
      const { task: t } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'idle', options: {} })
      // The agent's fetch answers once the task is handed over; it writes at once and never ends.
      const reply = await r.events.handle(await warmClaims(r, dataDir(r, member.id)), 'GET', '/tasks/next', Buffer.alloc(0))
      expect(reply.status).toBe(200)
      writeFileSync(join(dataDir(r, member.id), 'big'), Buffer.alloc(2 * MIB, 1))
      expect(await settled(r, t!.id)).toMatchObject({ status: 'failed', reason: 'disk_quota_exceeded' })
      await idleAfter(r, member.id, 1)
    })

    it('measures files deeper than PATH_MAX: 2 MiB below 21 directories of 200-character names fail the task', async () => {
      const r = await setup({ disk: { quotaMb: 1, intervalMs: 600_000 } })
      const { workspace, task: t } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'deep 32', options: {} })
      await agentDone(r, workspace.id, t!.id)
      await taskEnd(r, workspace.id, t!.id, 'all good')
      const failed = await settled(r, t!.id)
      expect(failed).toMatchObject({ status: 'failed', reason: 'disk_quota_exceeded' })
      expect(failed.summary).toMatch(/^The workspace directory uses 2\.[0-2] MB, over its disk quota of 1\.0 MB\./)
      writeFileSync(join(dataDir(r, workspace.id), 'go'), '')
      await idleAfter(r, workspace.id, 1)
      // GNU rm removes a tree deeper than PATH_MAX; the rig's own cleanup could not.
      execFileSync('rm', ['-rf', '--', dataDir(r, workspace.id)])
    })

    it('starts no watch when the quota is 0 (unlimited)', async () => {
      const r = await setup({ disk: { quotaMb: 0, intervalMs: 20 } })
      const { workspace, task: t } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'fill 32', options: {} })
      await agentDone(r, workspace.id, t!.id)
      expect((await task(r, t!.id))!.status).toBe('running')
      expect(r.controller.watchingDisk(workspace.id)).toBe(false)
      await taskEnd(r, workspace.id, t!.id, 'wrote 2 MiB')
      expect(await settled(r, t!.id)).toMatchObject({ status: 'completed' })
      writeFileSync(join(dataDir(r, workspace.id), 'go'), '')
      await idleAfter(r, workspace.id, 1)
    })
  })
}

describe('measureDisk', () => {
  const roots: string[] = []
  afterEach(() => {
    // GNU rm removes trees deeper than PATH_MAX (rmSync cannot).
    for (const root of roots.splice(0)) execFileSync('rm', ['-rf', '--', root])
  })
  const tree = (): string => {
    const root = mkdtempSync(join(tmpdir(), 'corral-du-'))
    roots.push(root)
    return root
  }

  it('counts allocated blocks of every entry, directories included, hard links once, never through a symlink', async () => {
    const root = tree()
    const outside = tree()
    writeFileSync(join(outside, 'big'), Buffer.alloc(4 * MIB, 1))
    mkdirSync(join(root, 'a/b/c'), { recursive: true })
    writeFileSync(join(root, 'a/one'), Buffer.alloc(MIB, 1))
    writeFileSync(join(root, 'a/b/c/two'), Buffer.alloc(MIB, 1))
    linkSync(join(root, 'a/one'), join(root, 'a/b/one-again'))
    symlinkSync(outside, join(root, 'a/elsewhere'))
    symlinkSync(join(outside, 'big'), join(root, 'big-link'))
    // A link to / where a directory was: a walk that followed it would measure the host.
    symlinkSync('/', join(root, 'a/b/root'))
    const usage = await measureDisk(root)
    expect(usage.usedBytes).toBeGreaterThanOrEqual(2 * MIB)
    expect(usage.usedBytes).toBeLessThan(2 * MIB + 256 * 1024)
  })

  it('measures entries deeper than PATH_MAX', async () => {
    const root = tree()
    // Made by relative steps (an absolute path this long cannot be used): 21 × 201 bytes > 4096.
    const chain = Array.from({ length: 21 }, (_, i) => String(i).padStart(200, 'd'))
    execFileSync(process.execPath, ['-e', `process.chdir(process.argv[1]); for (const d of ${JSON.stringify(chain)}) { require('fs').mkdirSync(d); process.chdir(d) }
      require('fs').writeFileSync('deep', Buffer.alloc(${3 * MIB}, 1))`, root])
    expect(root.length + chain.join('/').length).toBeGreaterThan(4096)
    expect((await measureDisk(root)).usedBytes).toBeGreaterThanOrEqual(3 * MIB)
  })

  it('measures a missing tree as empty; rejects when aborted, timed out, or without du', async () => {
    expect(await measureDisk(join(tree(), 'gone'))).toEqual({ usedBytes: 0 })
    const root = tree()
    await expect(measureDisk(root, { signal: AbortSignal.abort(new Error('task ended')) })).rejects.toThrow('task ended')
    await expect(measureDisk(root, { du: '/nonexistent/du' })).rejects.toThrow(DiskMeasureError)
    // A du that never answers: killed at the time limit.
    const slow = join(tree(), 'slow-du')
    writeFileSync(slow, '#!/bin/sh\nexec sleep 30\n', { mode: 0o755 })
    await expect(measureDisk(root, { du: slow, timeoutMs: 200 })).rejects.toThrow(/timed out after 200 ms/)
  })
})

describe('diskOverText', () => {
  it('shows as many decimals as it takes for the sizes to differ', () => {
    expect(diskOverText(2.34 * MIB, MIB)).toBe('The workspace directory uses 2.3 MB, over its disk quota of 1.0 MB.')
    expect(diskOverText(MIB + 4096, MIB)).toBe('The workspace directory uses 1.004 MB, over its disk quota of 1.000 MB.')
  })
})

describe(DiskWatch.name, () => {
  it('treats a failed measurement as unknown: reported, and the last known size decides, never zero', async () => {
    const root = mkdtempSync(join(tmpdir(), 'corral-du-'))
    try {
      // A du that answers 3 MiB once, then fails.
      const du = join(root, 'du-once')
      writeFileSync(du, `#!/bin/sh\nif [ -e "${root}/answered" ]; then echo 'du: cannot read' >&2; exit 1; fi\ntouch "${root}/answered"\nprintf '%s\\t%s\\n' ${3 * MIB} "$3"\n`, { mode: 0o755 })
      const errors: unknown[] = []
      const watch = new DiskWatch({ dir: join(root, 'data'), quotaBytes: MIB, intervalMs: 600_000, du, onOver: () => {}, onError: (e) => errors.push(e) })
      mkdirSync(join(root, 'data'))
      await watch.ready
      expect(watch.lastUsage).toEqual({ usedBytes: 3 * MIB })
      expect((await watch.check())!.usedBytes).toBe(3 * MIB)
      expect(String(errors[0])).toMatch(/cannot read/)
      watch.stop()
      // With nothing known, the end-of-task check rejects (the controller logs it).
      const fresh = new DiskWatch({ dir: join(root, 'data'), quotaBytes: MIB, intervalMs: 600_000, du, onOver: () => {} })
      await fresh.ready
      expect(fresh.lastUsage).toBeUndefined()
      expect(fresh.allowanceBytes).toBe(MIB)
      await expect(fresh.check()).rejects.toThrow(/cannot read/)
      fresh.stop()
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })

  it('with a known baseline, is ready at once without measuring, and the allowance comes from the baseline', async () => {
    const root = mkdtempSync(join(tmpdir(), 'corral-du-'))
    try {
      // A du that records each run: none may happen before the first interval.
      const du = join(root, 'du-count')
      writeFileSync(du, `#!/bin/sh\necho run >> "${root}/runs"\nprintf '%s\\t%s\\n' ${3 * MIB} "$3"\n`, { mode: 0o755 })
      const over: DiskUsage[] = []
      const idle = new DiskWatch({ dir: root, quotaBytes: MIB, intervalMs: 600_000, du, baselineBytes: 0, onOver: (u) => over.push(u) })
      await idle.ready
      expect(idle.allowanceBytes).toBe(MIB)
      expect(existsSync(join(root, 'runs'))).toBe(false)
      idle.stop()
      const cleaning = new DiskWatch({ dir: root, quotaBytes: MIB, intervalMs: 600_000, du, baselineBytes: 2 * MIB, onOver: () => {} })
      await cleaning.ready
      expect(cleaning.allowanceBytes).toBe(2 * MIB)
      cleaning.stop()
      // The first measurement comes one interval later and is held to the baseline's allowance.
      const watched = new DiskWatch({ dir: root, quotaBytes: MIB, intervalMs: 20, du, baselineBytes: 0, onOver: (u) => over.push(u) })
      const [usage] = await waitFor(async () => over.length > 0 && over, 'the watch to report')
      expect(usage!.usedBytes).toBe(3 * MIB)
      expect(watched.stopped).toBe(true)
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })

  it('allows a task that starts over the quota to run, and stops it once /data grows past its size at the start', async () => {
    const root = mkdtempSync(join(tmpdir(), 'corral-du-'))
    try {
      writeFileSync(join(root, 'old'), Buffer.alloc(2 * MIB, 1))
      const over: DiskUsage[] = []
      const watch = new DiskWatch({ dir: root, quotaBytes: MIB, intervalMs: 10, onOver: (u) => over.push(u) })
      const allowance = await waitFor(async () => watch.allowanceBytes, 'the first measurement')
      expect(allowance).toBeGreaterThanOrEqual(2 * MIB)
      // Still over at its end, whatever happened meanwhile.
      expect((await watch.check())!.usedBytes).toBeGreaterThanOrEqual(2 * MIB)
      writeFileSync(join(root, 'new'), Buffer.alloc(MIB, 1))
      const [usage] = await waitFor(async () => over.length > 0 && over, 'the watch to report')
      // Reported once, for the growth (not for the 2 MiB it started with), and then stopped.
      expect(over).toHaveLength(1)
      expect(usage!.usedBytes).toBeGreaterThanOrEqual(3 * MIB)
      expect(watch.stopped).toBe(true)
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })
})
