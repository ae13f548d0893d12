// The disk quota is held by the kernel (docs/security.md "The disk quota is the kernel's").
// Observed before: the quota was a `du` of /data every two seconds, so an agent wrote as far past it
// as it could in two seconds (one `dd` burst: hundreds of MB) before the scan caught it. Here, as
// root with loop devices (CI's machine), each workspace's /data is an ext4 image of the quota's
// size: real bubblewrap sandboxes write past it in several shapes and are refused at the quota.
import { randomUUID } from 'node:crypto'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { isMountPoint } from '../../src/runtime/data-image.js'
import { measureDisk } from '../../src/runtime/disk-usage.js'
import { DEFAULT_LIMITS } from '../../src/runtime/limits.js'
import { localRuntime, type LocalRuntimeUnderTest } from '../runtime/drivers.js'
import { testDialects } from '../helpers/dialects.js'
import { bwrapAvailable } from '../runtime/helpers.js'
import { startServe } from '../helpers/serve.js'
import { DiskWatch, type DiskUsage } from '../../src/workspaces/disk-watch.js'
import { controllerRig, waitFor, type ControllerRig } from '../workspaces/harness.js'

const asRoot = process.getuid?.() === 0
const available = asRoot && (await bwrapAvailable())
if (!available && asRoot && process.env.CORRAL_TEST_REQUIRE_BWRAP === '1') throw new Error('the kernel disk quota needs bubblewrap as root (CORRAL_TEST_REQUIRE_BWRAP=1)')

const MIB = 1024 * 1024
const QUOTA_MB = 16
const QUOTA = QUOTA_MB * MIB
const limits = { ...DEFAULT_LIMITS, memoryMb: 512, diskMb: QUOTA_MB }
const runtimeAt = (root: string) => localRuntime({ root, proxy: { host: '127.0.0.1', port: 1 }, warn: () => {}, stopGraceMs: 300, limits })

describe.skipIf(!available)('the disk quota in the kernel: writes past it are refused at it (bubblewrap as root, ext4 images)', () => {
  let root: string
  let runtime: LocalRuntimeUnderTest
  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'corral-disk-kernel-'))
    runtime = runtimeAt(root)
    expect(await runtime.check()).toMatchObject({ ok: true, problems: [], fatal: [], diskQuota: 'kernel' })
  })
  afterAll(async () => {
    await runtime?.close()
    rmSync(root, { recursive: true, force: true })
  })

  async function run(script: string, workspaceId = `ws_dq_${randomUUID().slice(0, 8)}`) {
    const ws = await runtime.provision({ workspaceId })
    writeFileSync(join(ws.dataDir, 'agent.sh'), script)
    const agent = await runtime.startAgent(ws.workspaceId, { command: ['/bin/sh', '/data/agent.sh'], proxyToken: 't' })
    const exit = await agent.exited
    // A full /data takes no more writes, the results' included: the agent reports on its output.
    const log = readFileSync(agent.logPath, 'utf8')
    const read = (name: string) => (existsSync(join(ws.dataDir, name)) ? readFileSync(join(ws.dataDir, name), 'utf8') : '')
    return { ws, exit, log, read, usage: await ws.volume.usage(), du: (await measureDisk(ws.dataDir)).usedBytes }
  }

  it('/data is a filesystem of its own, owned by the agent, holding nothing but what the workspace wrote', async () => {
    const { ws, read } = await run('ls -A /data > /data/ls')
    expect(await isMountPoint(ws.dataDir)).toBe(true)
    expect(read('ls').split('\n').filter(Boolean).sort()).toEqual(['agent.sh', 'ls'])
  })

  it('one big file in one burst (dd of four times the quota) is refused with ENOSPC at the quota', async () => {
    const { log, usage, du } = await run(`dd if=/dev/zero of=/data/big bs=1M count=${4 * QUOTA_MB}; echo rc=$?`)
    expect(log).toMatch(/No space left on device/)
    expect(log).toMatch(/rc=1/)
    expect(du).toBeLessThanOrEqual(QUOTA)
    expect(du).toBeGreaterThan(QUOTA - 2 * MIB) // the agent got (nearly) all of its quota
    expect(usage).toMatchObject({ kernel: true, full: true })
  })

  it('four writers at once get no more than the quota together', async () => {
    const { log, du, usage } = await run(`for i in 1 2 3 4; do dd if=/dev/zero of=/data/w$i bs=256k count=${4 * 4 * QUOTA_MB} & done; wait`)
    expect(log.match(/No space left on device/g)?.length).toBe(4)
    expect(du).toBeLessThanOrEqual(QUOTA)
    expect(usage.full).toBe(true)
  })

  it('many small files are refused at the quota (blocks or inodes, whichever runs out first)', async () => {
    const { log, du, usage } = await run([
      'mkdir /data/s; i=0',
      'while head -c 4096 /dev/zero > /data/s/f$i; do i=$((i+1)); done',
      'echo count=$i',
    ].join('\n'))
    expect(log).toMatch(/No space left on device/)
    expect(Number(/count=(\d+)/.exec(log)?.[1])).toBeGreaterThan(1000)
    expect(du).toBeLessThanOrEqual(QUOTA)
    expect(usage.full).toBe(true)
  })

  it('a sparse file counts what it allocates: a 1 GiB hole fits, filling it is refused at the quota', async () => {
    const { log, du, usage } = await run([
      'truncate -s 1G /data/sparse && echo made',
      'echo size=$(stat -c %s /data/sparse) allocated=$(du -B1 /data/sparse | cut -f1)',
      `dd if=/dev/zero of=/data/sparse bs=1M count=${2 * QUOTA_MB} conv=notrunc`,
    ].join('\n'))
    expect(log).toMatch(/^made$/m)
    expect(log).toMatch(new RegExp(`size=${1024 * MIB} allocated=0\\b`))
    expect(log).toMatch(/No space left on device/)
    expect(du).toBeLessThanOrEqual(QUOTA)
    expect(usage.full).toBe(true)
  })

  it('hard links count once: twenty names for a 6 MiB file are 6 MiB, and /data is not full', async () => {
    const { read, usage, du } = await run([
      'dd if=/dev/urandom of=/data/one bs=1M count=6 2>/dev/null',
      'for i in $(seq 1 20); do ln /data/one /data/link$i || exit 1; done; echo ok > /data/linked',
    ].join('\n'))
    expect(read('linked')).toBe('ok\n')
    expect(du).toBeLessThan(7 * MIB)
    expect(usage).toMatchObject({ kernel: true, full: false })
    expect(usage.usedBytes).toBeGreaterThanOrEqual(6 * MIB)
    expect(usage.usedBytes).toBeLessThan(7 * MIB)
  })

  it('the quota survives serve\'s restart and holds in a fork restored from a snapshot', async () => {
    const id = `ws_dq_keep_${randomUUID().slice(0, 8)}`
    const first = await run('dd if=/dev/urandom of=/data/kept bs=1M count=10 2>/dev/null; cd /data && sha256sum kept > kept.sum', id)
    const snap = await runtime.snapshot(id, 1, 'task')
    // serve closes (its images are unmounted) and starts again on the same data dir.
    await runtime.close()
    expect(await isMountPoint(first.ws.dataDir)).toBe(false)
    runtime = runtimeAt(root)
    expect((await runtime.check()).fatal).toEqual([])
    const again = await run('cd /data && sha256sum -c kept.sum; dd if=/dev/zero of=/data/more bs=1M count=32', id)
    expect(again.log).toMatch(/kept: OK/)
    expect(again.log).toMatch(/No space left on device/)
    expect(again.du).toBeLessThanOrEqual(QUOTA)
    // A fork at that snapshot: its own image, the file restored, the quota its own.
    const child = `ws_dq_fork_${randomUUID().slice(0, 8)}`
    const forked = await runtime.provision({ workspaceId: child, forkFrom: { workspaceId: id, taskCount: snap.taskCount } })
    expect(forked.restoredFrom?.ref).toBe(snap.ref)
    expect(await isMountPoint(forked.dataDir)).toBe(true)
    const inFork = await run('cd /data && sha256sum -c kept.sum; dd if=/dev/zero of=/data/more bs=1M count=32', child)
    expect(inFork.log).toMatch(/kept: OK/)
    expect(inFork.log).toMatch(/No space left on device/)
    expect(inFork.du).toBeLessThanOrEqual(QUOTA)
    // Removing a workspace takes its mount down with its files.
    await runtime.remove(child)
    expect(await isMountPoint(forked.dataDir)).toBe(false)
    expect(existsSync(forked.dataDir)).toBe(false)
  })
})

describe.skipIf(!available)('serve says at start how the disk quota is held', () => {
  it('by the kernel as root; by the scan fallback, named as such, with the process runtime', async () => {
    const env = { CORRAL_LOG_LEVEL: 'info', CORRAL_WORKSPACE_DISK_MB: '64' }
    const local = await startServe({ env })
    try {
      expect(local.output()).toMatch(/"disk_quota":"kernel".*workspace disk quota held by the kernel/)
    } finally {
      await local.stop()
    }
    const processRuntime = await startServe({ env, args: ['--runtime', 'process'] })
    try {
      expect(processRuntime.output()).toMatch(/"disk_quota":"scan".*held only by the scan fallback \(du of \/data every 2 s\)/)
    } finally {
      await processRuntime.stop()
    }
  })
})

describe('a kernel-held quota\'s outcome (DiskWatch over statfs measurements)', () => {
  const watch = (seq: DiskUsage[], baselineFull?: boolean) => {
    const overs: DiskUsage[] = []
    let i = 0
    const w = new DiskWatch({
      measure: async () => seq[Math.min(i++, seq.length - 1)]!, quotaBytes: QUOTA, intervalMs: 5, onOver: (u) => overs.push(u),
      ...(baselineFull === undefined ? {} : { baselineBytes: QUOTA - MIB, baselineFull }),
    })
    return { w, overs }
  }

  it('a full /data is at the quota though it never measures over it: the task fails', async () => {
    const { w, overs } = watch([{ usedBytes: MIB, kernel: true, full: false }, { usedBytes: QUOTA - 4096, kernel: true, full: true }])
    await waitFor(async () => overs.length > 0, 'the watch saw /data full')
    expect(overs[0]).toMatchObject({ full: true })
    w.stop()
  })

  it('a task that starts full may free space: it fails only if /data is still full at its end', async () => {
    const { w, overs } = watch([{ usedBytes: QUOTA - 4096, kernel: true, full: true }], true)
    await new Promise((r) => setTimeout(r, 60)) // several checks, all of them full
    expect(overs).toEqual([])
    expect(await w.check()).toMatchObject({ full: true })
    w.stop()
    const freed = watch([{ usedBytes: 2 * MIB, kernel: true, full: false }], true)
    expect(await freed.w.check()).toBeNull()
    freed.w.stop()
  })
})

for (const d of testDialects()) {
  describe.skipIf(!available)(`a task that writes past its quota fails with disk_quota_exceeded, refused by the kernel [${d.name}]`, () => {
    let rig: ControllerRig | undefined
    afterEach(async () => {
      await rig?.close()
      rig = undefined
    })

    it('one dd burst is refused at the quota, the task fails with the quota\'s outcome, and each workspace\'s agent is a uid of its own', async () => {
      let local: LocalRuntimeUnderTest | undefined
      // The agent runs the task's description as a shell command in /data, then exits.
      const agent = [process.execPath, '-e', "const t = JSON.parse(require('fs').readFileSync(process.env.CORRAL_INBOX + '/tasks.json', 'utf8'))[0]; require('child_process').spawnSync('/bin/sh', ['-c', t.description], { stdio: 'inherit' })"]
      rig = await controllerRig(await d.open(), {
        agentCommand: agent, disk: { quotaMb: QUOTA_MB, intervalMs: 60_000 }, sandboxUids: { first: 2_000_000_500, count: 100 },
        runtime: (root) => (local = runtimeAt(root)),
      })
      expect((await local!.check()).fatal).toEqual([])
      const r = rig
      const settled = (id: string) => waitFor(async () => { const t = await r.store.workspaces.tasks.byId(id); return t && t.status !== 'running' && t.status !== 'submitted' && t }, 'task settled', 30_000)
      const burst = `id -u > /data/uid; dd if=/dev/zero of=/data/big bs=1M count=${8 * QUOTA_MB}`
      const one = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: burst, options: {} })
      const two = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'id -u > /data/uid', options: {} })
      // The scan runs once a minute here: the outcome comes from the kernel's refusal, not from a scan catching up.
      const failed = await settled(one.task!.id)
      expect(failed).toMatchObject({ status: 'failed', reason: 'disk_quota_exceeded' })
      expect(failed.summary).toMatch(/reached its disk quota of 16\.0 MB: writes past it were refused/)
      const dataOf = (id: string) => join(r.root, 'runtime', 'workspaces', id, 'data')
      expect(readFileSync(join(r.root, 'runtime', 'workspaces', one.workspace.id, 'logs', 'agent.log'), 'utf8')).toMatch(/No space left on device/)
      expect((await measureDisk(dataOf(one.workspace.id))).usedBytes).toBeLessThanOrEqual(QUOTA)
      await settled(two.task!.id)
      const uids = [one, two].map((w) => Number(readFileSync(join(dataOf(w.workspace.id), 'uid'), 'utf8')))
      expect(new Set(uids).size).toBe(2)
      for (const uid of uids) expect(uid >= 2_000_000_500 && uid < 2_000_000_600).toBe(true)
    })
  })
}
