// The cgroup driver against stand-in hierarchies (directories laid out as the kernel shows them,
// found through a mountinfo and a /proc/self/cgroup given to detectCgroups): v2, the production
// case this host does not have, and v1, the one it has. The real kernel's enforcement is proved in
// test/security/sandbox-limits.test.ts.
import { spawnSync } from 'node:child_process'
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { detectCgroups, joinCommand } from '../../src/runtime/cgroups.js'

let top: string
beforeEach(async () => {
  top = await mkdtemp(join(tmpdir(), 'corral-cgroups-'))
})
afterEach(async () => rm(top, { recursive: true, force: true }))

const mountLine = (id: number, root: string, point: string, type: string, opts: string) => `${id} 1 0:${id} ${root} ${point} rw,relatime - ${type} ${type} ${opts}`

describe('cgroup v2', () => {
  it('makes a child of serve\'s own cgroup with memory.max, swap 0, oom.group, pids.max and cpu.max; reports an OOM kill', async () => {
    const own = join(top, 'unified', 'system.slice', 'corral.service')
    await mkdir(own, { recursive: true })
    await writeFile(join(own, 'cgroup.controllers'), 'cpuset cpu io memory pids\n')
    await writeFile(join(own, 'cgroup.subtree_control'), '')
    const found = await detectCgroups({
      mountinfo: mountLine(30, '/', join(top, 'unified'), 'cgroup2', 'rw'),
      self: '0::/system.slice/corral.service\n',
    })
    expect(found.driver).toMatchObject({ version: 2, where: own, cpu: true })
    const cg = await found.driver!.create('ws_a', { memoryBytes: 256 * 1024 * 1024, pids: 64, cpus: 1.5 })
    const dir = join(own, 'corral-ws_a')
    expect(cg.procs).toEqual([join(dir, 'cgroup.procs')])
    expect(await readFile(join(dir, 'memory.max'), 'utf8')).toBe(String(256 * 1024 * 1024))
    expect(await readFile(join(dir, 'memory.swap.max'), 'utf8')).toBe('0')
    expect(await readFile(join(dir, 'memory.oom.group'), 'utf8')).toBe('1')
    expect(await readFile(join(dir, 'pids.max'), 'utf8')).toBe('64')
    expect(await readFile(join(dir, 'cpu.max'), 'utf8')).toBe('150000 100000')
    expect(await cg.limitHit()).toBeUndefined()
    await writeFile(join(dir, 'memory.events'), 'low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n')
    expect(await cg.limitHit()).toBe('memory')
  })

  it('without the memory and pids controllers it says why, and falls back to v1 when that is writable', async () => {
    const own = join(top, 'unified')
    await mkdir(own, { recursive: true })
    await writeFile(join(own, 'cgroup.controllers'), 'hugetlb\n')
    for (const h of ['memory', 'pids']) await mkdir(join(top, h, 'job'), { recursive: true })
    const found = await detectCgroups({
      mountinfo: [mountLine(30, '/', own, 'cgroup2', 'rw'), mountLine(31, '/', join(top, 'memory'), 'cgroup', 'rw,memory'), mountLine(32, '/', join(top, 'pids'), 'cgroup', 'rw,pids')].join('\n'),
      self: '5:memory:/job\n4:pids:/job\n0::/\n',
    })
    expect(found.driver).toMatchObject({ version: 1, cpu: false })
  })
})

describe('cgroup v1', () => {
  it('makes corral/<name> in the memory, pids and cpu hierarchies (a container\'s mount root stripped) and reports a refused fork', async () => {
    for (const h of ['memory', 'pids', 'cpu,cpuacct']) await mkdir(join(top, h, 'pod'), { recursive: true })
    const found = await detectCgroups({
      mountinfo: [
        mountLine(31, '/docker/abc', join(top, 'memory'), 'cgroup', 'rw,memory'),
        mountLine(32, '/', join(top, 'pids'), 'cgroup', 'rw,pids'),
        mountLine(33, '/', join(top, 'cpu,cpuacct'), 'cgroup', 'rw,cpu,cpuacct'),
      ].join('\n'),
      self: '7:memory:/docker/abc/pod\n6:pids:/pod\n5:cpu,cpuacct:/pod\n',
    })
    expect(found.driver).toMatchObject({ version: 1, cpu: true })
    const cg = await found.driver!.create('ws_b', { memoryBytes: 1 << 27, pids: 32, cpus: 0.5 })
    const mem = join(top, 'memory', 'pod', 'corral', 'ws_b')
    const pids = join(top, 'pids', 'pod', 'corral', 'ws_b')
    const cpu = join(top, 'cpu,cpuacct', 'pod', 'corral', 'ws_b')
    expect(cg.procs).toEqual([join(mem, 'cgroup.procs'), join(pids, 'cgroup.procs'), join(cpu, 'cgroup.procs')])
    expect(await readFile(join(mem, 'memory.limit_in_bytes'), 'utf8')).toBe(String(1 << 27))
    expect(await readFile(join(mem, 'memory.memsw.limit_in_bytes'), 'utf8')).toBe(String(1 << 27))
    expect(await readFile(join(pids, 'pids.max'), 'utf8')).toBe('32')
    expect(await readFile(join(cpu, 'cpu.cfs_quota_us'), 'utf8')).toBe('50000')
    await writeFile(join(pids, 'pids.events'), 'max 4\n')
    expect(await cg.limitHit()).toBe('pids')
  })

  it('removes the empty cgroups a serve that is gone left behind, never a live one\'s', async () => {
    for (const h of ['memory', 'pids']) await mkdir(join(top, h, 'corral'), { recursive: true })
    const dead = spawnSync(process.execPath, ['-e', '0']).pid
    for (const h of ['memory', 'pids']) {
      await mkdir(join(top, h, 'corral', `ws_gone-${dead}-1`))
      await mkdir(join(top, h, 'corral', `ws_live-${process.pid}-1`))
    }
    await detectCgroups({
      mountinfo: [mountLine(31, '/', join(top, 'memory'), 'cgroup', 'rw,memory'), mountLine(32, '/', join(top, 'pids'), 'cgroup', 'rw,pids')].join('\n'),
      self: '7:memory:/\n6:pids:/\n',
    })
    for (const h of ['memory', 'pids']) expect(await readdir(join(top, h, 'corral'))).toEqual([`ws_live-${process.pid}-1`])
  })

  it('says plainly when nothing can be used', async () => {
    const found = await detectCgroups({ mountinfo: mountLine(1, '/', '/', 'ext4', 'rw'), self: '0::/\n' })
    expect(found).toEqual({ driver: null, reason: expect.stringMatching(/no cgroup v2 mount and no cgroup v1 memory and pids hierarchies/) })
  })
})

describe('joinCommand', () => {
  it('joins every cgroup and opens the seccomp filter before it execs the sandbox', () => {
    expect(joinCommand(['/a/cgroup.procs', '/b/cgroup.procs'], ['bwrap', '--x'], '/f.bpf'))
      .toEqual(['/bin/sh', '-c', expect.stringContaining('exec 5<"$f"'), 'corral-launch', '/f.bpf', '2', '/a/cgroup.procs', '/b/cgroup.procs', 'bwrap', '--x'])
  })
})
