// Per-workspace cgroups (docs/runtime.md "Resource limits"): the memory of a whole workspace (every
// process, and the pages of its private /tmp, which the kernel charges to the cgroup of the
// process that wrote them) and its number of processes and threads. rlimits cannot do either:
// RLIMIT_DATA is per process, and RLIMIT_NPROC counts per user, does not bind host root, and would
// be shared by every workspace whose agent runs as the same unprivileged uid.
//
// cgroup v2 (the common production case): a `corral-<workspace>` child of serve's own cgroup with
// `memory.max`, `memory.swap.max` 0, `memory.oom.group` 1 (an OOM kills the whole workspace) and
// `pids.max`. v2 allows no processes in a cgroup whose children have controllers, so serve first
// moves itself into a `corral-serve` leaf of its cgroup when it must. cgroup v1 (hosts like our CI):
// a `corral/<workspace>` child in the memory and the pids hierarchies, `memory.limit_in_bytes`
// (and `memory.memsw.limit_in_bytes`, so swap does not extend it) and `pids.max`.
//
// The sandbox joins before it starts: the command run on the host is a shell that writes its own
// pid into each `cgroup.procs` and then execs bubblewrap, so every process of the workspace is
// born inside (joinCommand).
import { access, mkdir, readdir, readFile, rmdir, writeFile } from 'node:fs/promises'
import { constants } from 'node:fs'
import { join } from 'node:path'
import { processGone } from '../proc/index.js'
import type { LimitHit } from './runtime.js'

export interface CgroupLimits {
  /** Bytes for the whole workspace; 0 = none. */
  memoryBytes: number
  /** Processes and threads; 0 = none. */
  pids: number
  /** CPUs' worth of time (CFS quota over a 100 ms period); 0 or absent = none. */
  cpus?: number
}

const CPU_PERIOD_US = 100_000
const quotaUs = (cpus: number): number => Math.max(1000, Math.round(cpus * CPU_PERIOD_US))

/** One workspace's cgroup(s): the files its launcher joins, and what it reports afterwards. */
export interface WorkspaceCgroup {
  /** `cgroup.procs` files the sandbox's first process writes itself into (one per hierarchy). */
  readonly procs: readonly string[]
  /** Which limit was hit while it ran (OOM kill, or a fork refused at pids.max), if any. */
  limitHit(): Promise<LimitHit | undefined>
  /** Removes the cgroup(s) once its processes are gone (bounded retries). */
  remove(): Promise<void>
}

export interface CgroupDriver {
  readonly version: 1 | 2
  /** Whether a CPU limit can be set (the cpu controller is there). */
  readonly cpu: boolean
  /** Where workspaces' cgroups are made (for messages). */
  readonly where: string
  create(name: string, limits: CgroupLimits): Promise<WorkspaceCgroup>
}

interface Mount {
  root: string
  point: string
  type: string
  options: string[]
}

function parseMounts(text: string): Mount[] {
  const out: Mount[] = []
  for (const line of text.split('\n')) {
    const dash = line.indexOf(' - ')
    if (dash < 0) continue
    const left = line.slice(0, dash).split(' ')
    const right = line.slice(dash + 3).split(' ')
    if (left.length < 5 || right.length < 3) continue
    out.push({ root: unescape(left[3]!), point: unescape(left[4]!), type: right[0]!, options: right[2]!.split(',') })
  }
  return out
}

/** mountinfo escapes spaces and the like as octal (`\040`). */
function unescape(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(Number.parseInt(o, 8)))
}

/** `/proc/self/cgroup`: hierarchy (v1 controller list, or '' for v2) → path. */
function parseOwn(text: string): Map<string, string> {
  const out = new Map<string, string>()
  for (const line of text.split('\n')) {
    const m = /^\d+:([^:]*):(.*)$/.exec(line)
    if (!m) continue
    if (m[1] === '') out.set('', m[2]!)
    for (const c of m[1]!.split(',')) if (c) out.set(c, m[2]!)
  }
  return out
}

/** The directory of our own cgroup inside `mount`. */
function ownDir(mount: Mount, path: string): string {
  const rel = mount.root !== '/' && (path === mount.root || path.startsWith(`${mount.root}/`)) ? path.slice(mount.root.length) : path
  return join(mount.point, rel)
}

async function writable(path: string): Promise<boolean> {
  return access(path, constants.W_OK).then(() => true, () => false)
}

async function counter(file: string, key: string): Promise<number> {
  const text = await readFile(file, 'utf8').catch(() => '')
  const m = new RegExp(`(?:^|\\n)${key} (\\d+)`).exec(text)
  return m ? Number(m[1]) : 0
}

/**
 * Removes the workspace cgroups that a serve which is gone left behind (a crash): their names end
 * in `-<pid>-<n>` of the serve that made them. A live serve's are never touched, and a cgroup
 * that still holds a process cannot be removed anyway.
 */
async function sweep(parent: string, prefix: string): Promise<void> {
  const names = await readdir(parent).catch(() => [] as string[])
  for (const name of names) {
    const m = /-(\d+)-\d+$/.exec(name)
    if (!name.startsWith(prefix) || !m || !processGone(Number(m[1]))) continue
    await rmdir(join(parent, name)).catch(() => {})
  }
}

async function removeDirs(dirs: readonly string[]): Promise<void> {
  for (const dir of dirs) {
    // A cgroup can only go once its last process has been reaped: retry briefly, then leave it.
    for (let i = 0; i < 20; i++) {
      const err = await rmdir(dir).then(() => null, (e: NodeJS.ErrnoException) => e)
      if (!err || err.code === 'ENOENT') break
      if (err.code !== 'EBUSY') break
      await new Promise((r) => setTimeout(r, 50))
    }
  }
}

class V2 implements CgroupDriver {
  readonly version = 2 as const
  constructor(readonly where: string, readonly cpu: boolean) {}

  async create(name: string, limits: CgroupLimits): Promise<WorkspaceCgroup> {
    const dir = join(this.where, `corral-${name}`)
    await mkdir(dir).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'EEXIST') throw e
    })
    if (limits.memoryBytes > 0) {
      await writeFile(join(dir, 'memory.max'), String(limits.memoryBytes))
      await writeFile(join(dir, 'memory.swap.max'), '0').catch(() => {})
      await writeFile(join(dir, 'memory.oom.group'), '1').catch(() => {})
    }
    if (limits.pids > 0) await writeFile(join(dir, 'pids.max'), String(limits.pids))
    if (limits.cpus && limits.cpus > 0 && this.cpu) await writeFile(join(dir, 'cpu.max'), `${quotaUs(limits.cpus)} ${CPU_PERIOD_US}`)
    const oomBefore = await counter(join(dir, 'memory.events'), 'oom_kill')
    const pidsBefore = await counter(join(dir, 'pids.events'), 'max')
    return {
      procs: [join(dir, 'cgroup.procs')],
      async limitHit() {
        if ((await counter(join(dir, 'memory.events'), 'oom_kill')) > oomBefore) return 'memory'
        if ((await counter(join(dir, 'pids.events'), 'max')) > pidsBefore) return 'pids'
        return undefined
      },
      remove: () => removeDirs([dir]),
    }
  }
}

class V1 implements CgroupDriver {
  readonly version = 1 as const
  constructor(readonly memory: string, readonly pids: string, readonly cpuDir: string | null) {}

  get cpu(): boolean {
    return this.cpuDir !== null
  }

  get where(): string {
    return `${this.memory} and ${this.pids}`
  }

  async create(name: string, limits: CgroupLimits): Promise<WorkspaceCgroup> {
    const mem = join(this.memory, 'corral', name)
    const pid = join(this.pids, 'corral', name)
    await mkdir(mem, { recursive: true })
    await mkdir(pid, { recursive: true })
    if (limits.memoryBytes > 0) {
      await writeFile(join(mem, 'memory.limit_in_bytes'), String(limits.memoryBytes))
      // Present with swap accounting; must not be below limit_in_bytes (written after it).
      await writeFile(join(mem, 'memory.memsw.limit_in_bytes'), String(limits.memoryBytes)).catch(() => {})
    }
    if (limits.pids > 0) await writeFile(join(pid, 'pids.max'), String(limits.pids))
    const cpu = limits.cpus && limits.cpus > 0 && this.cpuDir ? join(this.cpuDir, 'corral', name) : null
    if (cpu) {
      await mkdir(cpu, { recursive: true })
      await writeFile(join(cpu, 'cpu.cfs_period_us'), String(CPU_PERIOD_US))
      await writeFile(join(cpu, 'cpu.cfs_quota_us'), String(quotaUs(limits.cpus!)))
    }
    const oomBefore = await counter(join(mem, 'memory.oom_control'), 'oom_kill')
    const pidsBefore = await counter(join(pid, 'pids.events'), 'max')
    return {
      procs: [join(mem, 'cgroup.procs'), join(pid, 'cgroup.procs'), ...(cpu ? [join(cpu, 'cgroup.procs')] : [])],
      async limitHit() {
        if ((await counter(join(mem, 'memory.oom_control'), 'oom_kill')) > oomBefore) return 'memory'
        if ((await counter(join(pid, 'pids.events'), 'max')) > pidsBefore) return 'pids'
        return undefined
      },
      remove: () => removeDirs([mem, pid, ...(cpu ? [cpu] : [])]),
    }
  }
}

export interface CgroupDetection {
  driver: CgroupDriver | null
  /** Why there is none, in words an operator can act on. */
  reason?: string
}

/**
 * Finds where this process may make workspace cgroups: v2 with the memory and pids controllers
 * (moving serve into a leaf if v2's no-internal-process rule requires it), else v1 memory and pids
 * hierarchies that it can write.
 */
export async function detectCgroups(files: { mountinfo?: string; self?: string } = {}): Promise<CgroupDetection> {
  let mounts: Mount[]
  let own: Map<string, string>
  try {
    mounts = parseMounts(files.mountinfo ?? (await readFile('/proc/self/mountinfo', 'utf8')))
    own = parseOwn(files.self ?? (await readFile('/proc/self/cgroup', 'utf8')))
  } catch (err) {
    return { driver: null, reason: `cannot read /proc/self/mountinfo or /proc/self/cgroup (${(err as Error).message})` }
  }
  const reasons: string[] = []
  const v2mount = mounts.find((m) => m.type === 'cgroup2')
  if (v2mount && own.has('')) {
    const dir = ownDir(v2mount, own.get('')!)
    const controllers = (await readFile(join(dir, 'cgroup.controllers'), 'utf8').catch(() => '')).trim().split(/\s+/)
    if (controllers.includes('memory') && controllers.includes('pids')) {
      const ready = await enableV2(dir)
      const cpu = controllers.includes('cpu') && (await writeFile(join(dir, 'cgroup.subtree_control'), '+cpu').then(() => true, () => false))
      if (ready === true) {
        await sweep(dir, 'corral-')
        return { driver: new V2(dir, cpu) }
      }
      reasons.push(ready)
    } else {
      reasons.push(`cgroup v2 at ${dir} offers the controllers [${controllers.filter(Boolean).join(' ')}], not memory and pids`)
    }
  }
  const memMount = mounts.find((m) => m.type === 'cgroup' && m.options.includes('memory'))
  const pidsMount = mounts.find((m) => m.type === 'cgroup' && m.options.includes('pids'))
  if (memMount && pidsMount && own.has('memory') && own.has('pids')) {
    const memory = ownDir(memMount, own.get('memory')!)
    const pids = ownDir(pidsMount, own.get('pids')!)
    const cpuMount = mounts.find((m) => m.type === 'cgroup' && m.options.includes('cpu'))
    const cpu = cpuMount && own.has('cpu') ? ownDir(cpuMount, own.get('cpu')!) : null
    if ((await writable(memory)) && (await writable(pids))) {
      const usableCpu = cpu && (await writable(cpu)) ? cpu : null
      for (const h of [memory, pids, ...(usableCpu ? [usableCpu] : [])]) await sweep(join(h, 'corral'), '')
      return { driver: new V1(memory, pids, usableCpu) }
    }
    reasons.push(`cgroup v1 memory (${memory}) and pids (${pids}) hierarchies are not writable by this user`)
  } else if (!v2mount) {
    reasons.push('no cgroup v2 mount and no cgroup v1 memory and pids hierarchies')
  }
  return { driver: null, reason: reasons.join('; ') }
}

/** Enables memory and pids for children of `dir`; true, or why not. */
async function enableV2(dir: string): Promise<true | string> {
  const control = join(dir, 'cgroup.subtree_control')
  const enabled = (await readFile(control, 'utf8').catch(() => '')).split(/\s+/)
  if (enabled.includes('memory') && enabled.includes('pids')) return true
  try {
    await writeFile(control, '+memory +pids')
    return true
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EBUSY') return `cannot enable memory and pids in ${control} (${(err as NodeJS.ErrnoException).code})`
  }
  // EBUSY: serve's own processes sit in this cgroup. Move them into a leaf, then enable.
  try {
    const leaf = join(dir, 'corral-serve')
    await mkdir(leaf).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'EEXIST') throw e
    })
    const procs = (await readFile(join(dir, 'cgroup.procs'), 'utf8')).split('\n').filter(Boolean)
    for (const pid of procs) await writeFile(join(leaf, 'cgroup.procs'), pid).catch(() => {})
    await writeFile(control, '+memory +pids')
    return true
  } catch (err) {
    return `cannot delegate memory and pids below ${dir} (${(err as Error).message})`
  }
}

/**
 * The launcher: `sh -c` opens `fdFile` (when given) on fd 5 for bwrap's --seccomp, writes its pid
 * into every `procs` file, then execs `command`, so the sandbox and all it starts are born in the
 * workspace's cgroups. Exit 125 when a step fails.
 */
export function joinCommand(procs: readonly string[], command: readonly string[], fdFile?: string): string[] {
  const script = 'f=$1; shift; if [ -n "$f" ]; then exec 5<"$f" || exit 125; fi; '
    + 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"'
  return ['/bin/sh', '-c', script, 'corral-launch', fdFile ?? '', String(procs.length), ...procs, ...command]
}
