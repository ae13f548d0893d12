// The runtime driver and the workspace controller as serve builds them, after the proxy (the
// driver routes every sandbox through the proxy's address and trusts the corral CA) and before the
// API (whose workspace and task routes drive the controller).
// A driver whose check() fails does not stop serve: the reason is logged once in plain words and
// task creation answers service_unavailable with it, so the rest of the control plane stays
// usable. A configured workspace limit that cannot be enforced here does stop it (a clear error,
// non-zero exit), unless the operator opts out with --allow-unenforced-limits.
import { execFile } from 'node:child_process'
import { isAbsolute, join, relative, resolve } from 'node:path'
import type { Logger } from 'pino'
import type { AuditWriter } from '../audit/index.js'
import { PackTrees, type PackContent } from '../packs/index.js'
import { caCertPath } from '../proxy/index.js'
import type { AgentCallbackHandler } from '../contract/index.js'
import type { CapabilityTokens } from '../secrets/index.js'
import {
  RegistrySnapshotStore, agentCliDirsFromEnv, createRuntime, type LocalRuntimeOptions, type SnapshotStore, type WorkspaceLimits, type WorkspaceRuntime,
} from '../runtime/index.js'
import type { WorkspaceDirectory, WorkspaceLifecycle } from '../server/index.js'
import { storeFiles, type Store } from '../store/index.js'
import { AgentEvents, LeaseOwnership, WorkspaceService } from '../workspaces/index.js'
import type { Replica } from './replica.js'
import type { ServeConfig } from './config.js'

export interface RuntimeDriver {
  readonly runtime: WorkspaceRuntime
  /** Why workspaces cannot run on this host (the driver's check failed); undefined when they can. */
  readonly unavailable: string | undefined
}

/** Builds the configured driver and checks it can run here (limits it cannot enforce refuse the start). */
export async function openRuntime(config: ServeConfig, proxyUrl: URL, logger: Logger): Promise<RuntimeDriver> {
  const base = runtimeOptions(config, config.limits, proxyUrl, (line) => logger.warn(line))
  const runtime = await createRuntime(config.runtime, {
    ...base,
    ...snapshotStoreOf(config),
    sandboxUid: config.sandboxUid,
    allowUnenforcedLimits: config.allowUnenforcedLimits,
    settings: config.runtimeSettings,
  })
  try {
    const check = await runtime.check()
    const fatal = [...(check.fatal ?? [])]
    if (runtime.capabilities.dataOnHost && config.limits.diskMb > 0 && !(await duAvailable())) {
      const line = 'du (GNU coreutils) is not installed: the workspace disk quota (CORRAL_WORKSPACE_DISK_MB) cannot be measured on the host'
      if (config.allowUnenforcedLimits) logger.warn(`${line} (started anyway: --allow-unenforced-limits)`)
      else fatal.push(`${line}; install coreutils, set CORRAL_WORKSPACE_DISK_MB=0, or pass --allow-unenforced-limits (CORRAL_ALLOW_UNENFORCED_LIMITS=1)`)
    }
    if (fatal.length > 0) throw new Error(`workspace limits cannot be enforced here: ${fatal.join('; ')}`)
    const unavailable = check.ok ? undefined : `the ${config.runtime} workspace runtime cannot run here: ${check.problems.join('; ')}`
    if (unavailable) logger.warn(unavailable)
    for (const w of check.warnings) logger.warn(w)
    if (runtime.capabilities.dataOnHost) logDiskQuota(config, check.diskQuota, logger)
    return { runtime, unavailable }
  } catch (err) {
    await runtime.close().catch(() => {})
    throw err
  }
}

export interface WorkspaceParts {
  store: Store
  audit: AuditWriter
  logger: Logger
  tokens: CapabilityTokens
  packContent: PackContent
  driver: RuntimeDriver
  /** This process as a replica: on PostgreSQL its leases decide which workspaces it runs. */
  replica: Replica
}

export interface RunningWorkspaces {
  readonly controller: WorkspaceService
  readonly lifecycle: WorkspaceLifecycle
  readonly directory: WorkspaceDirectory
  /** The handler of the agents' callbacks (`/tasks/next`, `POST /task/{id}/event`), for the proxy. */
  readonly agentCallbacks: AgentCallbackHandler
  /** Starts the reconcile loop (warm agents may poll at once: hand the proxy `agentCallbacks` first). */
  start(): Promise<void>
  stop(): Promise<void>
}

/** Builds the controller and its agent-callback handler; nothing runs until start(). */
export function buildWorkspaces(config: ServeConfig, parts: WorkspaceParts): RunningWorkspaces {
  const { store, audit, packContent, driver, replica } = parts
  const packTrees = new PackTrees(packContent, config.packRegistry)
  const leases = replica.leases
  const controller = new WorkspaceService({
    ...(leases ? { ownership: new LeaseOwnership(store, { id: replica.id, ttlMs: replica.ttlMs, leases, onBeat: (cb) => replica.onBeat(cb) }, parts.logger) } : {}),
    store, audit, runtime: driver.runtime, tokens: parts.tokens, logger: parts.logger,
    agentCommand: config.agentCommand,
    agentCliDirs: agentCliDirsFromEnv(),
    ...(driver.runtime.capabilities.uidPerWorkspace ? { sandboxUids: { first: config.sandboxUid + 1, count: config.sandboxUidCount - 1 } } : {}),
    packs: {
      // A tree another replica stored is pulled from the registry by digest before it is mounted.
      findVisible: async (orgId, ids) => {
        const packs = await store.packs.findVisible(orgId, ids)
        for (const p of packs) await packTrees.ensure(p)
        return packs
      },
      dir: (digest) => packContent.dir(digest),
      pin: (digest) => packContent.pin(digest),
    },
    stagingRoot: join(config.dataDir, 'uploads'),
    // Checked on the host for every agent, whatever the driver (docs/runtime.md "Resource limits").
    diskQuotaMb: config.limits.diskMb,
    ...(config.agentEnv ? { agentEnv: { ...config.agentEnv } } : {}),
  })
  return {
    controller,
    agentCallbacks: new AgentEvents(controller, audit),
    lifecycle: driver.unavailable === undefined
      ? { available: true, controller }
      : { available: false, reason: driver.unavailable, controller },
    directory: {
      async get(orgId, id) {
        const ws = await controller.get(orgId, id)
        return ws ? { id: ws.id, created_by: ws.created_by } : undefined
      },
    },
    start: () => controller.start(),
    stop: () => controller.close(),
  }
}

/** The runtime's options from serve's: its root, the proxy, the CA, the limits, and what no sandbox may see. */
export function runtimeOptions(options: { dataDir: string; dbUrl?: string }, limits: WorkspaceLimits, proxyUrl: URL,
  warn: (line: string) => void): LocalRuntimeOptions {
  return {
    root: join(options.dataDir, 'runtime'),
    proxy: { host: proxyUrl.hostname.replace(/^\[|\]$/g, ''), port: Number(proxyUrl.port) },
    caCertPath: caCertPath(options.dataDir),
    warn,
    // One reading of the limits for the sandbox and the controller's disk watch alike.
    limits,
    // The data dir holds the store, admin.key, the CA key, the webhook secret, packs and uploads;
    // a store file inside it is hidden with it (the default `sqlite:<data-dir>/corral.db`).
    hidden: [options.dataDir, ...storeFiles(options.dbUrl).filter((f) => !isInside(options.dataDir, f))],
  }
}

/**
 * With a pack registry configured (CORRAL_PACK_REGISTRY), snapshots go there as OCI artifacts, so
 * every replica lists, restores and forks them (docs/workspaces.md "Snapshots in the registry");
 * without one, the driver keeps its local tars. Archives are staged under the data dir, which
 * sandboxes never see.
 */
export function snapshotStoreOf(config: Pick<ServeConfig, 'dataDir' | 'packRegistry'>): { snapshots?: SnapshotStore } {
  const push = config.packRegistry.push
  if (!push) return {}
  return {
    snapshots: new RegistrySnapshotStore({
      client: config.packRegistry.client, registry: push.registry, namespace: push.namespace,
      scratchDir: join(config.dataDir, 'runtime', 'snapshot-scratch'), ownScratch: true,
    }),
  }
}

function isInside(dir: string, file: string): boolean {
  const rel = relative(resolve(dir), file)
  return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel)
}

/** Whether `du` runs here (the disk watch measures with it). */
async function duAvailable(): Promise<boolean> {
  // node:child_process, not execa: this probe runs at every start, and execa is loaded only by a measurement.
  return new Promise((resolve) => execFile('du', ['--version'], { timeout: 5000 }, (err) => resolve(!err)))
}

/** Says once how the workspace disk quota is held: by the kernel, or only by the scan fallback. */
function logDiskQuota(config: ServeConfig, held: 'kernel' | 'scan' | undefined, logger: Logger): void {
  if (config.limits.diskMb <= 0) return
  const quota = { disk_quota_mb: config.limits.diskMb }
  if (held === 'kernel') logger.info({ ...quota, disk_quota: 'kernel' }, 'workspace disk quota held by the kernel (an ext4 image of the quota\'s size per workspace)')
  else logger.warn({ ...quota, disk_quota: 'scan' }, 'workspace disk quota held only by the scan fallback (du of /data every 2 s): an agent can write past it between two scans')
}
