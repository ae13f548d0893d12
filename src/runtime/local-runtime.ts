import { execFile } from 'node:child_process'
import { existsSync, lstatSync, realpathSync } from 'node:fs'
import { chown, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, posix } from 'node:path'
import { promisify } from 'node:util'
import { detectCgroups, joinCommand, type CgroupDetection, type CgroupDriver, type CgroupLimits } from './cgroups.js'
import { DataImages } from './data-image.js'
import { DirectoryRuntime, type Confinement, type LaunchPlan, type SharedFiles } from './directory-runtime.js'
import type { Owner } from './held-dir.js'
import { SECCOMP_FD, userNamespaceFilter } from './seccomp.js'
import { caEnv, packageRoot, proxyEnv } from './layout.js'
import { RuntimeError } from './errors.js'
import { SANDBOX_AGENT_CLI_DIR } from '../contract/index.js'
import {
  ALLOW_UNENFORCED, LIMIT_ENV, checkLimits, findPrlimit, limitsEnv, limitsFromEnv, prlimitArgs, runForOutput, withLimits, type WorkspaceLimits,
} from './limits.js'
import { SANDBOX_PACKS } from './sandbox-args.js'
import { EGRESS_OPT_OUT, missingEgressTools } from './egress.js'
import type { AgentLaunch, RuntimeCheck, RuntimeOptions } from './runtime.js'
import {
  DEFAULT_SANDBOX_UID, SANDBOX_UID, SETPRIV, bwrapArgs, nestedIn, nodePrefix, SANDBOX_CA, SANDBOX_CA_BUNDLE, SANDBOX_DATA, SANDBOX_INBOX, SANDBOX_INIT, SANDBOX_PROXY_PORT,
  SANDBOX_PROXY_SOCKET, type SandboxMounts,
} from './sandbox-args.js'

const run = promisify(execFile)

export interface LocalRuntimeOptions extends RuntimeOptions {
  /** The bubblewrap binary; default `bwrap` from PATH. */
  bwrap?: string
  /** More host paths the agent needs read-only at the same place (a pack's agent, a toolchain). */
  readOnlyPaths?: readonly string[]
  /** Resource limits of every workspace (docs/runtime.md "Resource limits"); default from CORRAL_WORKSPACE_* variables. */
  limits?: WorkspaceLimits
  /**
   * Host paths no sandbox may read: serve's data dir (store, admin key, CA key, packs, uploads) and
   * a SQLite store file kept outside it. Hidden wherever they lie inside a bound path (the corral
   * package is bound, and `./.corral` sits in it when serve runs from a checkout).
   */
  hidden?: readonly string[]
  /**
   * The host uid (and gid) of agents whose workspace was given none of its own (ProvisionSpec.agentUid)
   * when serve runs as root, and of the start-up trial; default DEFAULT_SANDBOX_UID.
   */
  sandboxUid?: number
  /** Start even when a configured limit cannot be enforced here (it is then a warning). */
  allowUnenforcedLimits?: boolean
  /** Where workspace cgroups can be made; default detectCgroups() (a seam for embedding and tests). */
  detectCgroups?: () => Promise<CgroupDetection>
  /**
   * Transparent egress (egress.ts, as root only): every TCP connection and lookup reaches the proxy
   * without HTTPS_PROXY. Default on; off with false or CORRAL_TRANSPARENT_EGRESS=off (docs/runtime.md).
   */
  transparentEgress?: boolean
}

export { DEFAULT_SANDBOX_UID }

const MIB = 1024 * 1024

/**
 * The `local` driver: each workspace's agent runs under bubblewrap in its own user, PID and network
 * namespaces. Its only network is loopback; HTTPS_PROXY points at the init's forwarder on
 * 127.0.0.1:3128, which relays through a bind-mounted unix socket to the host's ProxyBridge and on
 * to the policy proxy. An agent that ignores the proxy variables has nowhere to connect to.
 */
export class LocalRuntime extends DirectoryRuntime {
  readonly kind = 'local' as const
  readonly isolated = true
  protected readonly usesBridge = true
  readonly #bwrap: string
  readonly #readOnly: string[]
  readonly #limits: WorkspaceLimits
  readonly #hidden: readonly string[]
  #prlimit: string | null = null
  readonly #egressOption: boolean | undefined
  /** Tools transparent egress needs that the host lacks (then it is off, with a warning). */
  #egressMissing: string[] = []
  #disableUserns = false
  #probed = false
  /** Where workspace cgroups are made; null without (then memory and pids are not enforced). */
  #cgroups: CgroupDriver | null = null
  #cgroupReason: string | undefined
  readonly #root = process.getuid?.() === 0
  readonly #uid: number
  readonly #allowUnenforced: boolean
  readonly #detect: () => Promise<CgroupDetection>

  constructor(options: LocalRuntimeOptions) {
    super(options)
    this.#bwrap = options.bwrap ?? 'bwrap'
    this.#egressOption = options.transparentEgress
    this.#readOnly = [packageRoot(), ...linkedModules(packageRoot()), nodePrefix(), ...(options.readOnlyPaths ?? [])]
    this.#limits = options.limits ?? limitsFromEnv()
    this.#hidden = options.hidden ?? []
    this.#uid = options.sandboxUid ?? DEFAULT_SANDBOX_UID
    this.#allowUnenforced = options.allowUnenforcedLimits ?? false
    this.#detect = options.detectCgroups ?? (() => detectCgroups())
  }

  /** As root, agents are dropped to uids of their own (read at construction, before any field). */
  protected override ownsUids(): boolean {
    return process.getuid?.() === 0
  }

  /** As root, /data and what serve places there belong to the workspace's own unprivileged uid. */
  protected override owner(workspaceId?: string): Owner | null {
    if (!this.#root) return null
    const uid = this.#uidOf(workspaceId)
    return { uid, gid: uid }
  }

  /** Each workspace's /data an image of the quota's size, when check() found that it can be (data-image.ts). */
  protected override dataImages(): DataImages | null {
    return this.#images
  }

  #images: DataImages | null = null
  #imagesProbed: Promise<string | undefined> | undefined

  protected override async probedImages(): Promise<DataImages | null> {
    this.#imagesProbed ??= this.#checkDiskImages()
    await this.#imagesProbed
    return this.#images
  }

  /**
   * Whether the disk quota can be held by the kernel here: a probe image is made, mounted and
   * written past. Undefined when it can (the images are used from now on), else the limit's
   * unenforced line (the scan is then the fallback).
   */
  async #checkDiskImages(): Promise<string | undefined> {
    if (this.#limits.diskMb <= 0) return undefined
    const scratch = await mkdtemp(join(tmpdir(), 'corral-disk-check-'))
    try {
      const reason = await DataImages.probe(scratch)
      if (!reason) {
        this.#images = new DataImages(this.#limits.diskMb * MIB)
        return undefined
      }
      return `${LIMIT_ENV.diskMb}=${this.#limits.diskMb} cannot be enforced by the kernel here: ${reason}; /data would only be measured by the scan fallback (du every 2 s), and an agent can write past the quota between two scans`
    } finally {
      await rm(scratch, { recursive: true, force: true })
    }
  }

  protected override agentUid(workspaceId?: string): number {
    return this.#root ? this.#uidOf(workspaceId) : SANDBOX_UID
  }

  #uidOf(workspaceId: string | undefined): number {
    return (workspaceId === undefined ? undefined : this.workspaceUid(workspaceId)) ?? this.#uid
  }

  /** Whole-workspace memory and pids: a cgroup per launch, joined before bwrap starts. */
  protected override async confine(workspaceId: string): Promise<Confinement | undefined> {
    return this.#confineIn(`${workspaceId}-${process.pid}-${++this.#launches}`, this.#cgroupLimits())
  }

  #launches = 0

  #cgroupLimits(): CgroupLimits | undefined {
    const memoryBytes = this.#limits.memoryMb * MIB
    const { pids, cpus } = this.#limits
    return memoryBytes > 0 || pids > 0 || cpus > 0 ? { memoryBytes, pids, cpus: this.#cgroups?.cpu ? cpus : 0 } : undefined
  }

  /**
   * The launch around bwrap: the workspace's cgroups (when there are limits and cgroups) and, as
   * root, the seccomp filter on SECCOMP_FD. Undefined when neither applies.
   */
  async #confineIn(name: string, limits: CgroupLimits | undefined): Promise<Confinement | undefined> {
    const filter = this.#root ? await this.#seccompFile() : undefined
    const cgroup = limits && this.#cgroups ? await this.#cgroups.create(name, limits) : undefined
    if (!cgroup && !filter) return undefined
    return {
      wrap: (command) => joinCommand(cgroup?.procs ?? [], command, filter),
      hit: async () => (cgroup ? cgroup.limitHit().catch(() => undefined) : undefined),
      release: async () => {
        if (!cgroup) return undefined
        const hit = await cgroup.limitHit().catch(() => undefined)
        await cgroup.remove().catch(() => {})
        return hit
      },
    }
  }

  #filter: Promise<string | undefined> | undefined

  /** The filter refusing nested user namespaces, written once under the shared dir (seccomp.ts). */
  #seccompFile(): Promise<string | undefined> {
    this.#filter ??= (async () => {
      const filter = userNamespaceFilter()
      if (!filter) return undefined
      await mkdir(this.layout.shared, { recursive: true })
      const file = join(this.layout.shared, 'no-userns.bpf')
      await writeFile(file, filter, { mode: 0o644 })
      return file
    })()
    return this.#filter
  }

  async #detectCgroups(): Promise<void> {
    if (!this.#cgroupLimits()) return
    const found = await this.#detect()
    this.#cgroups = found.driver
    this.#cgroupReason = found.reason
  }

  /**
   * A real trial: starts a sandbox exactly as a workspace would be started (minus the bridge) and
   * runs node in it. Reports what is missing in words a person can act on.
   */
  async check(): Promise<RuntimeCheck> {
    const problems: string[] = []
    let help = ''
    try {
      await run(this.#bwrap, ['--version'])
      help = (await run(this.#bwrap, ['--help']).catch((e: { stdout?: string }) => ({ stdout: e.stdout ?? '' }))).stdout
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      problems.push(code === 'ENOENT'
        ? `bubblewrap is not installed (no ${this.#bwrap} on PATH): install the distribution's package (apt-get install bubblewrap, dnf install bubblewrap) or start with --runtime process, which runs agents WITHOUT isolation`
        : `${this.#bwrap} --version failed: ${(err as Error).message}`)
      return { ok: false, problems, warnings: [] }
    }
    this.#disableUserns = help.includes('--disable-userns')
    this.#prlimit = await findPrlimit()
    await this.#detectCgroups()
    this.#probeEgress()
    this.#probed = true
    if (this.#root && !existsSync(SETPRIV)) {
      problems.push(`${SETPRIV} (util-linux) is not installed: when corral serve runs as root, agents are dropped to an unprivileged uid with it; install util-linux`)
      return { ok: false, problems, warnings: [] }
    }
    const warnings: string[] = []
    if (this.#egressMissing.length > 0) {
      warnings.push(`transparent egress is off: ${this.#egressMissing.join(', ')} not installed (iproute2, nftables, perl); workspaces reach the proxy through HTTPS_PROXY only`)
    }
    const unenforced: string[] = []
    const scratch = await mkdtemp(join(tmpdir(), 'corral-bwrap-check-'))
    // A trial sandbox, started as a workspace's is (its cgroup, the agent's uid), with /dev/null
    // where the socket and init go: it checks namespaces, mounts, the uid and the limits.
    const trial = async (command: string[], cgroup?: CgroupLimits): Promise<string> => {
      const confinement = await this.#confineIn(`check-${process.pid}-${++this.#launches}`, cgroup)
      try {
        const argv = bwrapArgs(this.#mounts(scratch, '/dev/null', '/dev/null', null, this.#uid), command)
        const [file, ...args] = confinement ? confinement.wrap([this.#bwrap, ...argv]) : [this.#bwrap, ...argv]
        return await runForOutput(file!, args, { PATH: '/usr/bin:/bin' })
      } finally {
        await confinement?.release()
      }
    }
    try {
      const owner = this.owner()
      if (owner) await chown(scratch, owner.uid, owner.gid)
      await trial([process.execPath, '-e', "require('fs').writeFileSync('/data/ok', String(process.getuid()))"], this.#cgroupLimits())
      const uid = await readFile(join(scratch, 'ok'), 'utf8')
      const expected = String(this.agentUid())
      if (uid !== expected) problems.push(`the sandbox runs as uid ${uid}, expected ${expected} (is bwrap installed setuid?)`)
      const limits = await checkLimits(this.#limits, this.#prlimit, process.execPath, trial,
        { cgroups: this.#cgroups !== null, cpu: this.#cgroups?.cpu ?? false, root: this.#root, ...(this.#cgroupReason ? { cgroupReason: this.#cgroupReason } : {}) })
      problems.push(...limits.problems)
      warnings.push(...limits.warnings)
      unenforced.push(...limits.unenforced)
      this.#imagesProbed = this.#checkDiskImages()
      const disk = await this.#imagesProbed
      if (disk) unenforced.push(disk)
    } catch (err) {
      const stderr = String((err as { stderr?: string }).stderr ?? (err as Error).message).trim()
      problems.push(`bubblewrap cannot create a sandbox here: ${stderr}. ${userNamespaceHint(stderr)}`.trim())
    } finally {
      await rm(scratch, { recursive: true, force: true })
    }
    // Never a warning and a silent pass: the operator must opt out to run with them.
    if (this.#allowUnenforced) warnings.push(...unenforced.map((u) => `${u} (started anyway: ${ALLOW_UNENFORCED})`))
    const fatal = this.#allowUnenforced ? [] : unenforced.map((u) => `${u}; to start anyway without it, pass ${ALLOW_UNENFORCED}`)
    const diskQuota = this.#limits.diskMb > 0 ? { diskQuota: this.#images ? 'kernel' as const : 'scan' as const } : {}
    return { ok: problems.length === 0, problems, warnings, fatal, ...diskQuota }
  }

  /** Probes bwrap's options when serve started workspaces without calling check() first. */
  protected override async prepare(): Promise<void> {
    if (this.#probed) return
    const help = await run(this.#bwrap, ['--help']).then((r) => r.stdout, (e: { stdout?: string }) => e.stdout ?? '')
    this.#disableUserns = help.includes('--disable-userns')
    this.#prlimit = await findPrlimit()
    await this.#detectCgroups()
    if (!this.#prlimit && prlimitArgs(this.#limits, { nproc: this.#cgroups === null }).length > 0) {
      throw new RuntimeError('runtime_unavailable', 'prlimit (util-linux) is not installed, so the workspace limits cannot be applied')
    }
    this.#probeEgress()
    this.#probed = true
  }

  protected plan(workspaceId: string, launch: AgentLaunch, shared: SharedFiles, inbox: string): LaunchPlan {
    const mounts = { ...this.#mounts(this.layout.data(workspaceId), shared.init, this.layout.socket(workspaceId), shared, this.#uidOf(workspaceId)), inbox, packs: launch.packs ?? [], agentCli: launch.cli?.dir ?? null }
    // A workspace may opt out (its pack's agent.env, handed on by DirectoryRuntime): it only gives up a way out.
    if (launch.env?.[EGRESS_OPT_OUT] === 'off') delete mounts.egress
    const proxyUrl = `http://127.0.0.1:${SANDBOX_PROXY_PORT}`
    const env: Record<string, string> = {
      PATH: '/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin',
      HOME: '/tmp',
      USER: 'agent',
      LOGNAME: 'agent',
      LANG: 'C.UTF-8',
      ...proxyEnv(proxyUrl, launch.proxyToken),
      CORRAL_WORKSPACE_ID: workspaceId,
      CORRAL_WORKSPACE_DIR: SANDBOX_DATA,
      CORRAL_PROXY_URL: proxyUrl,
      CORRAL_INBOX: SANDBOX_INBOX,
      ...caEnv(shared.ca && SANDBOX_CA, shared.caBundle && SANDBOX_CA_BUNDLE),
      ...launch.env,
      ...(launch.cli ? { CORRAL_AGENT_CLI: posix.join(SANDBOX_AGENT_CLI_DIR, launch.cli.entry), CORRAL_AGENT_CLI_RUN: launch.cli.run } : {}),
      ...limitsEnv(this.#limits),
      CORRAL_PROXY_TOKEN: launch.proxyToken,
      // Read by the init only; it removes them (and CORRAL_PACK_ENV) from the agent's environment.
      CORRAL_BRIDGE_SOCKET: SANDBOX_PROXY_SOCKET,
      CORRAL_BRIDGE_PORT: String(SANDBOX_PROXY_PORT),
      CORRAL_STOP_GRACE_MS: String(this.options.stopGraceMs ?? 5000),
    }
    // A pack's environment travels as one JSON value that the init merges into the agent's
    // environment only. As real variables (bwrap's environment or --setenv), LD_PRELOAD or the like
    // would load the pack's code into bwrap on the host, or into prlimit before the limits apply.
    const packEnv = Object.fromEntries(Object.entries(launch.baseEnv ?? {}).filter(([k]) => !Object.hasOwn(env, k)))
    if (Object.keys(packEnv).length > 0) env.CORRAL_PACK_ENV = JSON.stringify(packEnv)
    const command = withLimits(this.#prlimit, this.#limits, [process.execPath, SANDBOX_INIT, ...launch.command], { nproc: this.#cgroups === null, fsize: this.#images === null })
    return { file: this.#bwrap, args: bwrapArgs(mounts, command), env }
  }

  /** bwrap binds them read-only at /packs/<name> (bwrapArgs); nothing to do on the host. */
  protected async mountPacks(): Promise<string> {
    return SANDBOX_PACKS
  }

  #transparentEgress(): boolean {
    return (this.#egressOption ?? process.env[EGRESS_OPT_OUT] !== 'off') && this.#egressMissing.length === 0
  }

  #probeEgress(): void {
    const wanted = this.#egressOption ?? process.env[EGRESS_OPT_OUT] !== 'off'
    this.#egressMissing = this.#root && wanted ? missingEgressTools() : []
  }

  #mounts(dataDir: string, init: string, proxySocket: string, shared: SharedFiles | null, uid: number): SandboxMounts {
    return {
      dataDir,
      init,
      passwd: shared?.passwd ?? '/dev/null',
      group: shared?.group ?? '/dev/null',
      proxySocket,
      inbox: null,
      packs: [],
      agentCli: null,
      ca: shared?.ca ?? null,
      caBundle: shared?.caBundle ?? null,
      readOnly: this.#readOnly,
      // Serve's secrets and other workspaces' data must stay invisible even though the corral package is bound.
      hide: nestedIn([...this.#hidden, this.layout.root, this.layout.sockets], this.#readOnly),
      disableUserns: this.#disableUserns,
      ...(this.#root ? { dropTo: { uid, gid: uid } } : {}),
      ...(this.#root && shared?.egress && this.#transparentEgress() ? { egress: shared.egress } : {}),
      ...(this.#root && userNamespaceFilter() ? { seccompFd: SECCOMP_FD } : {}),
      tmpBytes: this.#limits.memoryMb * MIB,
    }
  }
}

/**
 * The package's node_modules when it is a link to somewhere else (a pnpm store, a shared tree):
 * the agent resolves corral's dependencies through it, so its target is bound too.
 */
function linkedModules(root: string): string[] {
  try {
    const modules = join(root, 'node_modules')
    if (!lstatSync(modules).isSymbolicLink()) return []
    const target = realpathSync(modules)
    return target.startsWith(`${root}/`) ? [] : [target]
  } catch {
    return []
  }
}

function userNamespaceHint(stderr: string): string {
  if (/uid map|user namespace|Operation not permitted|No permissions to create/i.test(stderr)) {
    return 'Unprivileged user namespaces look disabled: enable them (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04+ also kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile for bwrap), or start with --runtime process, which runs agents WITHOUT isolation.'
  }
  return ''
}
