// What the workspace service is built from (serve passes it; the test rig builds its own), and the
// shapes every part of the lifecycle shares.
import type { Logger } from 'pino'
import type { AuditSink } from '../contract/index.js'
import type { WorkspaceRuntime } from '../runtime/index.js'
import type { Store, TaskOptions, UidRange } from '../store/index.js'
import type { Ownership } from './ownership.js'
import type { PackSource } from './packs.js'

/** Who acts: `userId` attributes audit rows, `creatorId` is the `:own` identity (key id for API keys). */
export interface Actor {
  userId: string
  creatorId: string
}

export interface TaskInput {
  id?: string
  description: string
  options: TaskOptions
  metadata?: Record<string, unknown>
  /** File names already written to `stagingDir(task id)`. */
  uploads?: string[]
}

/**
 * Mints the capability tokens agents carry (src/secrets/ CapabilityTokens, handed in by src/serve/): a task token, or a warm
 * agent's start-up token, good only for fetching its first task.
 */
export interface TokenMinter {
  mint(subject: { org_id: string; workspace_id: string; task_id?: string }, ttlSeconds: number, opts?: { startup?: boolean }): Promise<{ token: string; jti?: string }>
}

export interface WorkspaceServiceOptions {
  store: Store
  audit: AuditSink
  runtime: WorkspaceRuntime
  tokens: TokenMinter
  /** argv of the agent inside the workspace (defaultAgentCommand()) when no attached pack provides one. */
  agentCommand: readonly string[]
  /** node_modules folders searched for the agent CLIs before corral's own (docs/agent.md "Agent kinds"). */
  agentCliDirs?: readonly string[]
  /** The packs attached to roles (store.packs + the content store); without it no packs are mounted. */
  packs?: PackSource
  /** Where uploads wait until the workspace's /data exists. */
  stagingRoot: string
  logger?: Logger
  /** Extra environment for every agent (e.g. CORRAL_EVENTS_URL, CORRAL_MAX_ITERATIONS). */
  agentEnv?: Record<string, string>
  reconcileIntervalMs?: number
  defaultTaskTimeoutSeconds?: number
  /** Start the agent of a warm pool member ahead of its task (default true; docs/workspaces.md). */
  warmAgents?: boolean
  /** The clock of the dynamic pool rule (demand window, idle age); tests move it instead of sleeping. */
  now?: () => number
  /** How long a pool-pressure event raises a `dynamic` pool's target (default 5 min). */
  poolDemandWindowMs?: number
  /** /data's disk quota in MiB (limitsFromEnv().diskMb), checked on the host while a task runs; 0 or unset = none. */
  diskQuotaMb?: number
  /** Pause between two measurements of /data while a task runs (default 2 s). */
  diskCheckIntervalMs?: number
  /** Which replica acts on which workspace (ownership.ts `LeaseOwnership` on PostgreSQL); default: this process owns every workspace. */
  ownership?: Ownership
  /** How long an API stop or archive waits for the owning replica to finish it (default 120 s). */
  remoteWaitMs?: number
  /**
   * The host uids workspaces' agents run as, one per workspace, allocated in the store (docs/runtime.md
   * "One uid per workspace"); unset, the driver's own uid (one for all).
   */
  sandboxUids?: UidRange
}

/** Whether the service was closed: every part stops scheduling work once it is. */
export interface Lifetime {
  closed: boolean
}
