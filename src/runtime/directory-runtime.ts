import { type ChildProcess, spawn } from 'node:child_process'
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs'
import { chmod, chown, mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises'
import type { Readable } from 'node:stream'
import { setTimeout as sleep } from 'node:timers/promises'
import { join } from 'node:path'
import type { DataImages } from './data-image.js'
import { exists, removeIn, waitForSpawn } from './dir-ops.js'
import { RuntimeError } from './errors.js'
import { HeldDir, type Owner } from './held-dir.js'
import { HostVolume } from './host-volume.js'
import { RuntimeLayout } from './layout.js'
import { checkPackMounts, packLaunch } from './pack-mounts.js'
import { ProxyBridge } from './proxy-bridge.js'
import type { ForkSource, WorkspaceDriver } from './driver.js'
import type {
  AgentExit, AgentLaunch, AgentProcess, DriverCapabilities, LimitHit, PackMount, ProvisionSpec, RuntimeCheck, RuntimeOptions, SnapshotRecord, WorkspaceHandle,
  WorkspacePhase,
} from './runtime.js'
import { SANDBOX_UID } from './sandbox-args.js'
import { type SharedFiles, writeIdentity, writeSharedFiles } from './shared-files.js'
import { EGRESS_OPT_OUT } from './egress.js'

/** What a driver runs on the host to start a workspace's init (bwrap …, or node directly). */
export interface LaunchPlan {
  file: string
  args: string[]
  env: Record<string, string>
  /** Working directory of the init (and so of the agent); the sandbox sets its own. */
  cwd?: string
}

/** What a driver sets up around one agent's launch (its cgroups) and tears down after it. */
export interface Confinement {
  /** The host command (file and args) that runs the plan inside the confinement. */
  wrap(command: readonly string[]): string[]
  /** A limit hit so far (while the sandbox runs). */
  hit(): Promise<LimitHit | undefined>
  /** After the sandbox is gone: which limit was hit, if any; removes what was set up. */
  release(): Promise<LimitHit | undefined>
}

interface Running {
  child: ChildProcess
  bridge: ProxyBridge | null
  exited: Promise<AgentExit>
}

export type { SharedFiles } from './shared-files.js'

/** A local driver's handle: /data is a host directory (tests and the sandbox mounts read its path). */
export interface HostWorkspaceHandle extends WorkspaceHandle {
  readonly volume: HostVolume
  /** Host path of the directory mounted as /data inside the workspace. */
  readonly dataDir: string
}

/**
 * Workspaces as directories on this host: the part both drivers share (layout, snapshots, the
 * agent's lifecycle and logs). A driver says how to start the init process (`plan`) and whether
 * the workspace reaches the proxy through the unix-socket bridge.
 */
export abstract class DirectoryRuntime implements WorkspaceDriver<HostWorkspaceHandle> {
  abstract readonly kind: string
  abstract readonly isolated: boolean
  readonly capabilities: DriverCapabilities = { adoption: null, warmClaims: null, hostLogs: this, dataOnHost: true, uidPerWorkspace: this.ownsUids() }
  protected readonly layout: RuntimeLayout
  protected readonly options: Readonly<RuntimeOptions>
  protected readonly warn: (line: string) => void
  readonly #running = new Map<string, Running>()
  /** Workspaces between the start request and their entry in #running (closes the check-then-act gap). */
  readonly #starting = new Set<string>()
  #shared: Promise<SharedFiles> | null = null

  constructor(options: RuntimeOptions) {
    this.options = Object.freeze({ ...options })
    this.layout = new RuntimeLayout(options.root)
    this.warn = options.warn ?? ((line) => process.stderr.write(`${line}\n`))
  }

  abstract check(): Promise<RuntimeCheck>
  protected abstract readonly usesBridge: boolean
  /** Once, before the first agent starts: driver-specific detection (e.g. bwrap's options). */
  protected async prepare(): Promise<void> {}
  protected abstract plan(workspaceId: string, launch: AgentLaunch, shared: SharedFiles, inbox: string): LaunchPlan
  /** Makes the launch's packs visible to the agent; returns their parent directory as the agent sees it. */
  protected abstract mountPacks(workspaceId: string, packs: readonly PackMount[]): Promise<string>
  /**
   * The host user that owns the workspace's /data and runs its agent when it is not serve's own
   * (serve runs as root); null otherwise. Without a workspace: the driver's default (its trial).
   */
  protected owner(_workspaceId?: string): Owner | null {
    return null
  }

  /** The agent's uid as the sandbox's /etc/passwd names it (`agent`). */
  protected agentUid(_workspaceId?: string): number {
    return SANDBOX_UID
  }

  readonly #uids = new Map<string, number>()

  /** The host uid the control plane gave the workspace (ProvisionSpec.agentUid) as its provision recorded it, if any. */
  protected workspaceUid(workspaceId: string): number | undefined {
    const known = this.#uids.get(workspaceId)
    if (known !== undefined) return known
    try {
      const saved = JSON.parse(readFileSync(join(this.layout.workspace(workspaceId), 'provision.json'), 'utf8')) as { uid?: unknown }
      if (typeof saved.uid !== 'number') return undefined
      this.#uids.set(workspaceId, saved.uid)
      return saved.uid
    } catch {
      return undefined
    }
  }

  /** The kernel's disk quota: each workspace's /data an image of its own (data-image.ts); null: none (the scan fallback). */
  protected dataImages(): DataImages | null {
    return null
  }

  /** dataImages() once the driver has probed for them (a driver whose check() was not called probes now). */
  protected async probedImages(): Promise<DataImages | null> {
    return this.dataImages()
  }

  /** Whether the workspace's /data exists; an image is mounted first (after a restart), never its empty mount point used. */
  async #mountData(workspaceId: string): Promise<boolean> {
    const dataDir = this.layout.data(workspaceId)
    if (!(await exists(dataDir))) return false
    const image = join(this.layout.workspace(workspaceId), 'data.img')
    if (!(await exists(image))) return true
    const images = await this.probedImages()
    // Never the empty directory beneath in its place: the workspace's files are in the image.
    if (!images) throw new RuntimeError('runtime_unavailable', `the /data of workspace ${workspaceId} is a disk image, and images cannot be mounted here (the disk quota is not held by the kernel)`)
    await images.mount(image, dataDir)
    return true
  }

  /** Whether agents can be given host uids of their own: only a driver that drops them from root. */
  protected ownsUids(): boolean {
    return false
  }

  /** Per-launch confinement (the local driver's cgroups); none by default. */
  protected async confine(_workspaceId: string): Promise<Confinement | undefined> {
    return undefined
  }

  async provision(spec: ProvisionSpec, fork: ForkSource): Promise<HostWorkspaceHandle> {
    const dir = this.layout.workspace(spec.workspaceId)
    const dataDir = this.layout.data(spec.workspaceId)
    const provisionFile = join(dir, 'provision.json')
    // Re-adoption after a crash of serve: a workspace whose data dir exists was fully provisioned
    // (the dir only appears by rename once a fork's restore has finished).
    if (await this.#mountData(spec.workspaceId)) {
      const saved = JSON.parse(await readFile(provisionFile, 'utf8').catch(() => '{}')) as { restoredFrom?: SnapshotRecord | null; uid?: number }
      const uid = spec.agentUid ?? saved.uid
      if (uid !== undefined) this.#uids.set(spec.workspaceId, uid)
      if (uid !== saved.uid) await writeFile(provisionFile, JSON.stringify({ ...saved, uid }))
      // A /data written under another uid (serve's own, or the one uid an older corral gave every
      // agent) is given, whole, to the workspace's, and closed to every other.
      const owner = this.owner(spec.workspaceId)
      if (owner && (await stat(dataDir)).uid !== owner.uid) await this.#chownData(dataDir, owner)
      return this.#handle(spec.workspaceId, saved.restoredFrom ?? null)
    }
    if (spec.agentUid !== undefined) this.#uids.set(spec.workspaceId, spec.agentUid)
    const owner = this.owner(spec.workspaceId)
    await mkdir(join(dir, 'logs'), { recursive: true })
    let restoredFrom: SnapshotRecord | null = null
    const partial = `${dataDir}.partial`
    const images = this.dataImages()
    await images?.unmount(partial)
    await removeIn(dir, 'data.partial')
    await mkdir(partial, { mode: owner ? 0o700 : 0o755 })
    if (owner) await this.#chownData(partial, owner)
    // The quota in the kernel: /data is a filesystem of the quota's size (a fork's restore included).
    if (images) await images.create(join(dir, 'data.img.partial'), partial, owner)
    if (spec.forkFrom && spec.forkFrom.taskCount > 0) {
      restoredFrom = await fork.at(spec.forkFrom.workspaceId, spec.forkFrom.taskCount)
      if (!restoredFrom) {
        await images?.unmount(partial)
        await removeIn(dir, 'data.partial')
        throw new RuntimeError('not_found',
          `workspace ${spec.forkFrom.workspaceId} has no snapshot taken after ${spec.forkFrom.taskCount} tasks`,
          { workspace_id: spec.forkFrom.workspaceId, fork_point_task_count: spec.forkFrom.taskCount })
      }
      // Unpacked as the agent's user (GNU tar), then everything given to it: whatever the archive
      // holds, the restore cannot write where that user could not.
      await fork.restore(restoredFrom, new HostVolume(spec.workspaceId, partial, owner))
      if (owner) await this.#chownData(partial, owner)
    }
    await writeFile(provisionFile, JSON.stringify({ restoredFrom, ...(spec.agentUid === undefined ? {} : { uid: spec.agentUid }) }))
    if (images) {
      // A mount point cannot be renamed: the image moves first, then the directory, then it is mounted.
      await images.unmount(partial)
      await rename(join(dir, 'data.img.partial.json'), join(dir, 'data.img.json'))
      await rename(join(dir, 'data.img.partial'), join(dir, 'data.img'))
    }
    await rename(partial, dataDir)
    if (images) await images.mount(join(dir, 'data.img'), dataDir)
    return this.#handle(spec.workspaceId, restoredFrom)
  }

  #handle(workspaceId: string, restoredFrom: SnapshotRecord | null): HostWorkspaceHandle {
    const volume = this.volume(workspaceId)
    return { workspaceId, volume, dataDir: volume.hostDir, restoredFrom }
  }

  /** Whether /data exists (its image mounted first, when it has one). */
  provisioned(workspaceId: string): Promise<boolean> {
    return this.#mountData(workspaceId)
  }

  volume(workspaceId: string): HostVolume {
    const dataDir = this.layout.data(workspaceId)
    const images = this.dataImages()
    const kernel = images && existsSync(join(this.layout.workspace(workspaceId), 'data.img'))
      ? { ready: () => this.#mountData(workspaceId).then(() => undefined), usage: () => images.usage(dataDir) }
      : undefined
    return new HostVolume(workspaceId, dataDir, this.owner(workspaceId), kernel)
  }

  agentLogPath(workspaceId: string): string {
    return this.layout.logs(workspaceId)
  }

  async startAgent(workspaceId: string, launch: AgentLaunch): Promise<AgentProcess> {
    if (this.#running.has(workspaceId) || this.#starting.has(workspaceId)) {
      throw new RuntimeError('agent_running', `an agent already runs in workspace ${workspaceId}`)
    }
    if (launch.command.length === 0) throw new RuntimeError('runtime_unavailable', 'empty agent command')
    this.#starting.add(workspaceId)
    try {
      if (!(await this.#mountData(workspaceId))) throw new RuntimeError('workspace_not_found', `workspace ${workspaceId} is not provisioned`)
      return await this.#start(workspaceId, launch)
    } finally {
      this.#starting.delete(workspaceId)
    }
  }

  async #start(workspaceId: string, launch: AgentLaunch): Promise<AgentProcess> {
    const shared = await this.#identity(workspaceId, await this.#sharedFiles())
    const inbox = await this.#writeInbox(workspaceId, launch.files ?? {})
    await rm(this.layout.stoppedMarker(workspaceId), { force: true })
    checkPackMounts(launch.packs ?? []) // before any link or bind is made from the names
    const packs = packLaunch(launch, await this.mountPacks(workspaceId, launch.packs ?? []))
    const bridge = this.usesBridge ? await ProxyBridge.open(this.layout.socket(workspaceId), this.options.proxy) : null
    // connect(2) needs write permission on the socket: it is the agent's (serve runs as root).
    const owner = this.owner(workspaceId)
    if (bridge && owner) await chown(this.layout.socket(workspaceId), owner.uid, owner.gid)
    // A pack's own environment goes beneath everything corral sets (each driver's plan); its
    // CORRAL_* names are ours.
    // CORRAL_* names are ours, with one exception: a pack may turn transparent egress off for its
    // workspace (egress.ts), which only takes a way out away.
    const baseEnv = Object.fromEntries(Object.entries(launch.baseEnv ?? {}).filter(([k]) => !k.startsWith('CORRAL_')))
    const egressOff: Record<string, string> = launch.baseEnv?.[EGRESS_OPT_OUT] === 'off' ? { [EGRESS_OPT_OUT]: 'off' } : {}
    let plan = this.plan(workspaceId, { ...launch, command: packs.command, env: { ...launch.env, ...packs.env, ...egressOff }, baseEnv }, shared, inbox)
    let confinement: Confinement | undefined
    try {
      confinement = await this.confine(workspaceId)
    } catch (err) {
      await bridge?.close()
      throw new RuntimeError('runtime_unavailable', `the limits of workspace ${workspaceId} cannot be set up: ${(err as Error).message}`)
    }
    if (confinement) {
      const [file, ...args] = confinement.wrap([plan.file, ...plan.args])
      plan = { ...plan, file: file!, args }
    }
    const logPath = this.layout.logs(workspaceId)
    await mkdir(join(this.layout.workspace(workspaceId), 'logs'), { recursive: true })
    const log = openSync(logPath, 'a')
    let child: ChildProcess
    let spawnError: Error | null = null
    try {
      // The environment goes through env, never argv: argv is world-readable in /proc.
      child = spawn(plan.file, plan.args, { env: plan.env, stdio: ['pipe', log, log, 'pipe'], ...(plan.cwd ? { cwd: plan.cwd } : {}) })
    } finally {
      closeSync(log)
    }
    const exited = new Promise<AgentExit>((resolve) => {
      let settled = false
      const done = (exit: AgentExit): void => {
        if (settled) return
        settled = true
        if (!confinement) return resolve(exit)
        confinement.release().then((hit) => resolve(hit ? { ...exit, limitHit: hit } : exit), () => resolve(exit))
      }
      child.once('close', (code, signal) => done({ code, signal }))
      // A spawn failure (missing bwrap or node) may emit only 'error'.
      child.once('error', (err) => {
        spawnError = err
        done({ code: null, signal: null })
      })
    })
    const running: Running = { child, bridge, exited }
    this.#running.set(workspaceId, running)
    void exited.then(async () => {
      if (this.#running.get(workspaceId) === running) this.#running.delete(workspaceId)
      await bridge?.close()
    })
    child.stdin?.on('error', () => {}) // a sandbox that died first makes the stop request's EPIPE moot

    const started = await waitForSpawn(child.stdio[3] as Readable | null, exited)
    if (!started.ok && spawnError) started.reason = `cannot run ${plan.file}: ${(spawnError as Error).message}`
    if (!started.ok) {
      const tail = (await readFile(logPath, 'utf8').catch(() => '')).trim().split('\n').slice(-5).join(' | ')
      throw new RuntimeError('runtime_unavailable',
        `agent of workspace ${workspaceId} did not start: ${started.reason}${tail ? ` (log: ${tail})` : ''}`)
    }
    return { workspaceId, pid: child.pid ?? -1, exited, logPath, ...(confinement ? { limitHit: () => confinement.hit() } : {}) }
  }

  async stopAgent(workspaceId: string): Promise<void> {
    const running = this.#running.get(workspaceId)
    if (!running) return
    running.child.stdin?.end()
    const grace = (this.options.stopGraceMs ?? 5000) + 2000
    const timer = sleep(grace, 'timeout' as const, { ref: false })
    if ((await Promise.race([running.exited, timer])) === 'timeout') running.child.kill('SIGKILL')
    await running.exited
  }

  /** The stop snapshot is taken: a marker tells phase() the workspace is stopped, not ready. */
  async teardown(workspaceId: string, record: SnapshotRecord): Promise<void> {
    await writeFile(this.layout.stoppedMarker(workspaceId), record.ref)
  }

  async phase(workspaceId: string): Promise<{ phase: WorkspacePhase; pid?: number }> {
    const running = this.#running.get(workspaceId)
    if (running) return { phase: 'running', ...(running.child.pid === undefined ? {} : { pid: running.child.pid }) }
    if (!(await exists(this.layout.data(workspaceId)))) return { phase: 'absent' }
    return { phase: (await exists(this.layout.stoppedMarker(workspaceId))) ? 'stopped' : 'ready' }
  }

  /** /data (and its image) and what says it exists go; the workspace's logs and local snapshots stay. */
  async release(workspaceId: string): Promise<void> {
    await this.stopAgent(workspaceId)
    const dir = this.layout.workspace(workspaceId)
    await this.dataImages()?.unmount(this.layout.data(workspaceId))
    // Removed by descriptor, never through a link the agent made; provision.json last, so a crash
    // midway leaves no /data that claims to be whole.
    for (const name of ['data', 'data.partial', 'data.img', 'data.img.json', 'stopped']) await removeIn(dir, name)
    await rm(join(dir, 'provision.json'), { force: true })
  }

  async remove(workspaceId: string): Promise<void> {
    await this.stopAgent(workspaceId)
    await this.dataImages()?.unmount(this.layout.data(workspaceId))
    // /data below is the agent's: removed by descriptor, never through a link it made.
    await removeIn(join(this.layout.root, 'workspaces'), workspaceId)
    this.#uids.delete(workspaceId)
  }

  async #chownData(dataDir: string, owner: Owner): Promise<void> {
    const held = await HeldDir.open(dataDir, '/data')
    try {
      await held.chownTree(owner)
    } finally {
      await held.close()
    }
    await chmod(dataDir, 0o700) // /data (serve's own path, not the agent's) closed to every other uid
  }

  async close(): Promise<void> {
    await Promise.all([...this.#running.keys()].map((id) => this.stopAgent(id)))
    await this.dataImages()?.closeAll()
  }

  /** The workspace's own /etc/passwd and group when its agent's uid is not the driver's default one. */
  async #identity(workspaceId: string, shared: SharedFiles): Promise<SharedFiles> {
    const uid = this.agentUid(workspaceId)
    if (uid === this.agentUid()) return shared
    return { ...shared, ...(await writeIdentity(this.layout.workspace(workspaceId), uid)) }
  }

  async #writeInbox(workspaceId: string, files: Readonly<Record<string, string>>): Promise<string> {
    const inbox = this.layout.inbox(workspaceId)
    await rm(inbox, { recursive: true, force: true })
    await mkdir(inbox, { recursive: true })
    for (const [name, content] of Object.entries(files)) {
      if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(name)) throw new RuntimeError('runtime_unavailable', `invalid inbox file name ${JSON.stringify(name)}`)
      await writeFile(join(inbox, name), content, { mode: 0o644 })
    }
    return inbox
  }

  #sharedFiles(): Promise<SharedFiles> {
    this.#shared ??= this.#writeShared()
    return this.#shared
  }

  async #writeShared(): Promise<SharedFiles> {
    await this.prepare()
    return writeSharedFiles(this.layout.shared, this.agentUid(), this.options.caCertPath)
  }
}
