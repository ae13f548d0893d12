// The workspace runtime contract (docs/design.md "How to add a runtime"; docs/runtime.md "The driver interface").
// The control plane owns workspace and task state; a driver only owns what lives where workspaces
// run: the workspace's /data (behind a WorkspaceVolume: a host directory for the local drivers, a
// PersistentVolumeClaim for a Kubernetes one), the agent process and its sandbox, the bridge to the
// outbound proxy, and the snapshots (through a SnapshotStore: tars on local disk, or a registry).
// A driver never decides state transitions: it does what it is told and reports what it sees.
import type { Readable } from 'node:stream'
import type { RoleResources, SnapshotFileEntry } from '../contract/index.js'
import type { AgentCliMount } from './agent-clis.js'
import type { Archiver } from './archiver.js'
import type { DiskUsage, MeasureOptions } from './disk-usage.js'

/** Where agents' outbound traffic goes: the policy proxy's TCP listener on the host. */
export interface ProxyAddress {
  host: string
  port: number
}

export interface RuntimeOptions {
  /** Root directory of the runtime's state (workspace dirs, snapshots). Usually `<data dir>/runtime`. */
  root: string
  proxy: ProxyAddress
  /** PEM file of the corral CA, trusted inside every workspace (the proxy mints leaf certificates from it). */
  caCertPath?: string
  /** Diagnostics that a person should see (missing bubblewrap, no isolation); defaults to stderr. */
  warn?: (line: string) => void
  /** How long an agent gets between the stop request and SIGKILL. Default 5000 ms. */
  stopGraceMs?: number
  /** Snapshot tar implementation; default GNU tar when installed, else the tar package. */
  archiver?: Archiver
  /** Where snapshots go; default the local tar store under `root` (LocalSnapshotStore). */
  snapshots?: SnapshotStore
}

/** Result of the start-up check: `ok` false means the driver cannot run workspaces here. */
export interface RuntimeCheck {
  ok: boolean
  /** Plain-language lines: what is missing and how to fix it, or why the mode is unsafe. */
  problems: string[]
  warnings: string[]
  /**
   * Configured limits that cannot be enforced here: serve refuses to start over them (non-zero
   * exit), unless the operator opted out, which turns them into warnings.
   */
  fatal?: string[]
  /**
   * How the disk quota is held here (docs/runtime.md "Disk quota"): by the kernel, or only by the
   * controller's scan of /data (the fallback). Absent: no quota, or the driver's own (a claim's size).
   */
  diskQuota?: 'kernel' | 'scan'
}

export interface ProvisionSpec {
  workspaceId: string
  /** Who the workspace belongs to, for drivers that label what they create (the Kubernetes driver). */
  owner?: { orgId: string; roleId: string }
  /** Start from a parent's snapshot instead of an empty /data (a fork). */
  forkFrom?: { workspaceId: string; taskCount: number }
  /** An unclaimed warm pool member: drivers that label what they create mark it (claimWarm ends it). */
  pooled?: boolean
  /**
   * The host uid (and gid) of this workspace alone, allocated by the control plane from the sandbox
   * uid range (docs/runtime.md "One uid per workspace"): its agent runs as it and /data is its.
   * The driver keeps it with the workspace; unset, it keeps the one it has, else its own default.
   */
  agentUid?: number
}

/**
 * A workspace's /data as its driver holds it. Opaque to the lifecycle, which never computes a path
 * into it: it measures it (the disk quota) and places host files in it (task uploads) through the
 * volume. The local drivers' volume is a host directory (HostVolume); a Kubernetes driver's is a
 * PersistentVolumeClaim reached through its pod.
 */
export interface WorkspaceVolume {
  readonly workspaceId: string
  /** Allocated bytes under /data now; rejects when that cannot be told (a failure is unknown, never 0). */
  usage(options?: MeasureOptions): Promise<DiskUsage>
  /**
   * Copies the files `names` of the serve host's directory `from` into /data/<into...>/ (creating
   * the directories), owned by the agent's user. Nothing is written through a link the workspace
   * made: such a component fails the placement (RuntimeError `unsafe_path`), nothing is replaced.
   */
  placeFiles(into: readonly string[], from: string, names: readonly string[]): Promise<void>
}

/**
 * A volume not reachable as a host directory (a PersistentVolumeClaim) that can still be archived
 * and restored: a tar of /data written to a host file, a host tar unpacked into /data. Snapshot
 * stores use it for volumes that are not HostVolumes (LocalSnapshotStore, docs/kubernetes.md).
 */
export interface ArchivableVolume extends WorkspaceVolume {
  /** Writes a tar of /data (relative paths, pax format) to the host file `file`. */
  archiveTo(file: string): Promise<void>
  /** Unpacks the host tar `file` into /data. */
  extractFrom(file: string): Promise<void>
}

export function isArchivable(volume: WorkspaceVolume): volume is ArchivableVolume {
  return typeof (volume as Partial<ArchivableVolume>).archiveTo === 'function' && typeof (volume as Partial<ArchivableVolume>).extractFrom === 'function'
}

/** A workspace's agent that still runs where the workspace runs, as `adopt` finds it. */
export interface RunningAgent {
  readonly workspaceId: string
  readonly process: AgentProcess
}

export interface WorkspaceHandle {
  readonly workspaceId: string
  /** The workspace's /data. */
  readonly volume: WorkspaceVolume
  /** The snapshot a fork was restored from; null for an empty start (including a fork at 0). */
  readonly restoredFrom: SnapshotRecord | null
}

/**
 * Where snapshots of /data live (docs/runtime.md "Snapshot stores"): local tars for one replica
 * (LocalSnapshotStore), an OCI registry when several replicas share the database. A store reads
 * and writes volumes it knows how to reach (the local store: host directories); a driver is built
 * with the store its volumes fit.
 */
export interface SnapshotStore {
  /** Archives the volume now, recorded with the number of completed tasks. */
  put(volume: WorkspaceVolume, taskCount: number, reason: SnapshotReason): Promise<SnapshotRecord>
  /** The workspace's snapshots, oldest first. */
  list(workspaceId: string): Promise<SnapshotRecord[]>
  /** The snapshot a fork at `taskCount` restores: the one taken right after that many tasks. */
  at(workspaceId: string, taskCount: number): Promise<SnapshotRecord | null>
  /** The entries of a snapshot without unpacking it; the latest unless `ref` is given. */
  entries(workspaceId: string, ref?: string): Promise<SnapshotFileEntry[]>
  /**
   * One path of a snapshot without unpacking it (snapshot-content.ts): a regular file's bytes, or a
   * tar of a directory's subtree ('' for all of /data). Optional: a store without it cannot serve
   * `GET /v1/workspaces/{id}/snapshot/content`.
   */
  content?(record: SnapshotRecord, path: string): Promise<SnapshotContent>
  /** Unpacks a snapshot into a volume (an empty one: a fork's new /data). */
  restore(record: SnapshotRecord, into: WorkspaceVolume): Promise<void>
  /** Deletes every snapshot of the workspace. */
  remove(workspaceId: string): Promise<void>
}

export interface AgentLaunch {
  /** argv run inside the workspace, e.g. `[node, corral/bin/run.js, 'agent']` or a pack's agent. */
  command: readonly string[]
  /** The capability token; exported as CORRAL_PROXY_TOKEN (sent as `Proxy-Authorization: Bearer`). */
  proxyToken: string
  /** Extra environment for the agent (task source, provider, model settings). Never logged. */
  env?: Readonly<Record<string, string>>
  /**
   * Files handed to the agent read-only (e.g. `tasks.json`), outside /data so they never reach a
   * snapshot. Their directory is exported as CORRAL_INBOX. Names are plain file names.
   */
  files?: Readonly<Record<string, string>>
  /**
   * Environment beneath everything the runtime and the control plane set (a pack's `agent.env`):
   * a variable both define keeps corral's value.
   */
  baseEnv?: Readonly<Record<string, string>>
  /**
   * Pack content trees handed to this agent read-only (docs/runtime.md "Packs"): at
   * `/packs/<name>` inside the sandbox, linked under the workspace directory by the process
   * driver. CORRAL_PACKS lists the names, CORRAL_PACKS_DIR is their parent.
   */
  packs?: readonly PackMount[]
  /**
   * The mounted pack that provides `command`: a relative `command[0]` with a slash (`bin/agent`)
   * and every argument starting with `./` resolve inside its directory (exported as
   * CORRAL_PACK_DIR); bare names are looked up on PATH. The working directory stays /data.
   */
  commandPack?: string
  /**
   * The role's requests and limits (docs/roles.md "Resources"), over the server's defaults: the
   * Kubernetes driver's agent container. The local drivers apply the server-wide limits only.
   */
  resources?: RoleResources
  /**
   * The agent CLI this launch's adapter runs (docs/agent.md "Agent kinds"): its package directory,
   * bound read-only at SANDBOX_AGENT_CLI_DIR (the process driver uses the host path); the driver
   * exports the executable's path as CORRAL_AGENT_CLI and how to run it as CORRAL_AGENT_CLI_RUN.
   */
  cli?: AgentCliMount
}

/** One pack's content tree on the host, and the name it is mounted under. */
export interface PackMount {
  /** Pack name (the role-name pattern): the directory name under /packs. */
  name: string
  /** Host path of the extracted, read-only content tree. */
  dir: string
  /**
   * The pack's OCI image by digest (`<registry>/<repository>@sha256:…`), when it is in the registry:
   * what a driver whose agents run off this host mounts instead of `dir` (Kubernetes image volumes).
   */
  imageRef?: string
}

export interface AgentExit {
  code: number | null
  signal: NodeJS.Signals | null
  /** A workspace limit that was hit while the agent ran (read from its cgroup), if any. */
  limitHit?: LimitHit
}

/** Why a workspace's processes were stopped or refused by a limit (docs/runtime.md "Resource limits"). */
export type LimitHit = 'memory' | 'pids'

export interface AgentProcess {
  readonly workspaceId: string
  /** Host pid of the process that owns the workspace's sandbox (bwrap, or the init in process mode). */
  readonly pid: number
  /** Resolves when the agent and its sandbox are gone. */
  readonly exited: Promise<AgentExit>
  /** Host path of the agent's combined stdout/stderr log (`pod/<ns>/<pod>/agent` for a Kubernetes pod: no host file). */
  readonly logPath: string
  /**
   * The agent's output as text (whole lines), for drivers whose output is not a host file: the
   * Kubernetes driver follows the agent container's log through the API server (from its start,
   * resumed without duplicates after a drop) until the agent is gone. Each call follows anew.
   */
  readonly output?: () => AsyncIterable<string>
  /** A workspace limit hit so far by this agent's sandbox (its cgroup), if the driver can tell. */
  limitHit?(): Promise<LimitHit | undefined>
}

export type SnapshotReason = 'task' | 'stop'

export interface SnapshotRecord {
  /** Opaque reference, stable for the life of the workspace's snapshots (`fork_source_snapshot_ref`). */
  ref: string
  workspaceId: string
  /** Completed tasks in the workspace when the snapshot was taken. */
  taskCount: number
  reason: SnapshotReason
  createdAt: string
  sizeBytes: number
}

/** One entry of a snapshot listing: the contract's (src/contract/wire.ts), named here for the drivers. */
export type { SnapshotFileEntry }

/** One path of a snapshot, read without unpacking it (snapshot-content.ts). */
export interface SnapshotContent {
  /** `file`: the file's bytes; `tar`: an uncompressed tar of the directory's subtree (all of /data for path ''). */
  kind: 'file' | 'tar'
  /** The entry read (absent for the whole snapshot). */
  entry?: SnapshotFileEntry
  /** Bytes the stream will deliver. */
  size: number
  stream: Readable
}

export type WorkspacePhase = 'absent' | 'ready' | 'running' | 'stopped'

export interface WorkspaceStatus {
  workspaceId: string
  phase: WorkspacePhase
  /** Set while an agent runs. */
  pid?: number
  snapshots: number
}

/** Agents that outlive the replica that started them (Kubernetes pods), found again by `adopt`. */
export interface AgentAdoption {
  /**
   * The agents still running in these workspaces (all when unset), followed from now on by this
   * process. A replica taking over a dead one's workspace (docs/workspaces.md "Takeover") lets such
   * a task go on; without adoption (or with no agent found) the task fails `replica_lost` and /data
   * is provisioned from the last snapshot.
   */
  adopt(workspaceIds?: readonly string[]): Promise<RunningAgent[]>
}

/** Warm pool members that are objects of the driver's own (Kubernetes: the claim and pods). */
export interface WarmClaims {
  /**
   * Marks a warm member provisioned with `pooled` claimed by `claimant`, atomically against other
   * claimers (docs/kubernetes.md "Runtime: warm pools and packs"). False when another claimant
   * holds it or the member is gone; the database claim stays the authority, this is the cluster's copy.
   */
  claimWarm(workspaceId: string, claimant: string): Promise<boolean>
}

/** Agent output written to a host file (AgentProcess.logPath), known before the agent starts. */
export interface HostLogs {
  agentLogPath(workspaceId: string): string
}

/** What a driver can do beyond the contract: each null when it cannot, never an absent member. */
export interface DriverCapabilities {
  readonly adoption: AgentAdoption | null
  readonly warmClaims: WarmClaims | null
  readonly hostLogs: HostLogs | null
  /** /data is a directory on serve's host: serve measures the disk quota there with `du`. */
  readonly dataOnHost: boolean
  /** Each workspace's agent can run as a host uid of its own (ProvisionSpec.agentUid; docs/runtime.md "One uid per workspace"). */
  readonly uidPerWorkspace: boolean
}

/**
 * A driver wrapped with its snapshot store (DrivenRuntime, driven-runtime.ts): what the lifecycle
 * holds. Built by createRuntime (registry.ts) from the driver's registration.
 */
export interface WorkspaceRuntime {
  readonly kind: string
  /** False for the `process` driver: agents there run with the privileges of `corral serve`. */
  readonly isolated: boolean
  readonly capabilities: DriverCapabilities
  /** A real trial run of the driver's sandbox; call at start and refuse to serve when not ok. */
  check(): Promise<RuntimeCheck>
  /** Creates (or, after a crash, re-adopts) the workspace's /data; restores a fork's snapshot. */
  provision(spec: ProvisionSpec): Promise<WorkspaceHandle>
  /** Starts the agent inside the workspace; at most one agent per workspace at a time. */
  startAgent(workspaceId: string, launch: AgentLaunch): Promise<AgentProcess>
  /** Ends the running agent (grace period, then SIGKILL); resolves when it is gone. No-op when none runs. */
  stopAgent(workspaceId: string): Promise<void>
  /** Archives /data now, recorded with the number of completed tasks. */
  snapshot(workspaceId: string, taskCount: number, reason: SnapshotReason): Promise<SnapshotRecord>
  /** Stops the agent, takes the stop snapshot and tears the sandbox down; /data stays for a restart. */
  stop(workspaceId: string, taskCount: number): Promise<SnapshotRecord>
  /** The snapshot a fork at `taskCount` restores: the one taken right after that many tasks. */
  snapshotAt(workspaceId: string, taskCount: number): Promise<SnapshotRecord | null>
  snapshots(workspaceId: string): Promise<SnapshotRecord[]>
  /** Reads the archive's headers only (no unpacking). Latest snapshot unless `ref` is given. */
  listSnapshotFiles(workspaceId: string, ref?: string): Promise<SnapshotFileEntry[]>
  /** SnapshotStore.content of the latest snapshot, or of `ref`; `runtime_unavailable` for a store without content(). */
  readSnapshot(workspaceId: string, path: string, ref?: string): Promise<SnapshotContent>
  status(workspaceId: string): Promise<WorkspaceStatus>
  /** WorkspaceVolume.placeFiles for the workspace's /data (the volume of its provision). */
  placeFiles(workspaceId: string, into: readonly string[], from: string, names: readonly string[]): Promise<void>
  /**
   * Deletes the workspace's /data and what holds it (a claim, pods), keeping its snapshots: the
   * next provision restores /data from them. An archived workspace's storage (docs/workspaces.md).
   */
  release(workspaceId: string): Promise<void>
  /** Deletes the workspace's /data, whatever the driver made for it, and its snapshots. */
  remove(workspaceId: string): Promise<void>
  /** Closes the driver (docs/runtime.md: local agents are stopped, Kubernetes pods keep running). */
  close(): Promise<void>
}
