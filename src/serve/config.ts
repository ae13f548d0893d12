// serve's flags and environment read once into one ServeConfig, before anything is opened: a bad
// value stops serve with a message naming it, and no part reads process.env on its own after this
// (the parts still receive `env` where their own documented variables are read, e.g. the proxy's
// CORRAL_PROXY_* limits).
import { resolve } from 'node:path'
import { auditSinksFromEnv, journalSettingsFromEnv, type JournalDurability } from '../audit/index.js'
import type { AuditSinkSettings } from './audit-sinks.js'
import { archiveLimitsFromEnv, registrySettingsFromEnv, type ArchiveLimits, type RegistrySettings } from '../packs/index.js'
import { DEFAULT_PROXY_PORT } from '../proxy/index.js'
import { oidcConfigFromEnv, type OidcConfig } from '../server/index.js'
import { oauthAllowPrivate } from '../secrets/index.js'
import { defaultStoreUrl } from '../store/index.js'
import { leaseTtlMs } from './replica.js'
import {
  DEFAULT_SANDBOX_UID, defaultAgentCommand, isRuntimeKind, limitsFromEnv, RUNTIME_KINDS, runtimeSettings, type RuntimeKind, type WorkspaceLimits,
} from '../runtime/index.js'

/** What `corral serve` was asked for: its flags (oclif already folded in their env variables). */
export interface ServeOptions {
  dataDir: string
  /** Store URL; default `sqlite:<data-dir>/corral.db`. */
  dbUrl?: string
  host: string
  port: number
  /** `--proxy-port`; unset: CORRAL_PROXY_PORT, else 7071, or a free port when `port` is 0. */
  proxyPort?: number
  /** `--runtime` (local | process); unset: CORRAL_RUNTIME, else local. */
  runtime?: string
  /** `--allow-unenforced-limits` (or CORRAL_ALLOW_UNENFORCED_LIMITS=1). */
  allowUnenforcedLimits?: boolean
  /** `--lease-ttl` in seconds (as typed); unset: CORRAL_LEASE_TTL, else 15. */
  leaseTtl?: string
  /** `--public-url`; unset: CORRAL_PUBLIC_URL. */
  publicUrl?: string
  env?: NodeJS.ProcessEnv
}

export interface ServeConfig {
  /** Absolute. */
  readonly dataDir: string
  readonly dbUrl: string
  readonly host: string
  readonly port: number
  readonly proxyPort: number
  readonly env: NodeJS.ProcessEnv
  readonly runtime: RuntimeKind
  readonly allowUnenforcedLimits: boolean
  /** Workspace resource limits (CORRAL_WORKSPACE_*), one reading for the sandbox and the disk watch. */
  readonly limits: WorkspaceLimits
  /**
   * CORRAL_SANDBOX_UID and CORRAL_SANDBOX_UID_COUNT: the host uid range of agents (docs/runtime.md
   * "One uid per workspace"); its first uid is the driver's own (the start-up trial), each workspace
   * is given one of the rest.
   */
  readonly sandboxUid: number
  readonly sandboxUidCount: number
  /** The runtime registration's own settings (kubernetes: CORRAL_K8S_* and CORRAL_AGENT_IMAGE, docs/kubernetes.md "Runtime: configuration"). */
  readonly runtimeSettings: unknown
  /** CORRAL_AGENT_COMMAND (a JSON array), else the reference agent. */
  readonly agentCommand: readonly string[]
  /** Extra environment for every agent (CORRAL_AGENT_MAX_ITERATIONS). */
  readonly agentEnv: Readonly<Record<string, string>> | undefined
  readonly taskRateLimit: { capacity: number; refillPerSecond: number } | false
  /** CORRAL_UPSTREAM_CA: extra PEM files trusted for upstream TLS. */
  readonly upstreamCaFiles: readonly string[]
  readonly packArchiveLimits: ArchiveLimits
  readonly packRegistry: RegistrySettings
  /** An external OIDC identity provider (CORRAL_OIDC_*), besides the built-in one. */
  readonly oidc: OidcConfig | undefined
  /** CORRAL_OWNER_EMAIL: the first start's owner user. */
  readonly ownerEmail: string | undefined
  /** How long a replica's workspace leases outlive its last heartbeat (docs/workspaces.md "Replicas and leases"). */
  readonly leaseTtlMs: number
  /** CORRAL_DRAIN_DELAY_MS: on SIGTERM, how long /readyz answers 503 while everything is still served (docs/kubernetes.md "Upgrade"). */
  readonly drainDelayMs: number
  /** `--public-url` / CORRAL_PUBLIC_URL: where browsers reach the API (the OAuth callback's base); unset → no OAuth consent. */
  readonly publicUrl: string | undefined
  /** CORRAL_AUDIT_DURABILITY / CORRAL_AUDIT_SYNC_INTERVAL_MS: what an acknowledged audit row survives (docs/reliability.md "Journal durability"). */
  readonly auditJournal: { journalDurability: JournalDurability; journalSyncIntervalMs: number }
  /** CORRAL_OAUTH_ALLOW_PRIVATE: the special address ranges OAuth providers may be at (docs/credentials.md); default none. */
  readonly oauthAllowPrivate: readonly string[]
  /** CORRAL_AUDIT_WITNESS_DIR, CORRAL_AUDIT_APPEND_INTERVAL_MS, CORRAL_AUDIT_CHECKPOINT_INTERVAL_MS (docs/audit.md "The provable log"). */
  readonly auditLog: { witnessDir: string | undefined; appendIntervalMs: number; checkpointIntervalMs: number }
  /** CORRAL_AUDIT_OTLP_* / CORRAL_AUDIT_OCSF_* and CORRAL_DEPLOYMENT: where the audit log is shipped (docs/audit.md "OTLP streaming"). */
  readonly auditSinks: AuditSinkSettings
}

export function serveConfig(options: ServeOptions): ServeConfig {
  const env = options.env ?? process.env
  const dataDir = resolve(options.dataDir)
  const runtime = String(options.runtime ?? env.CORRAL_RUNTIME ?? 'local')
  if (!isRuntimeKind(runtime)) throw new Error(`--runtime must be one of ${RUNTIME_KINDS.join(', ')} (got ${runtime})`)
  const limits = limitsFromEnv(env)
  const explicitProxyPort = options.proxyPort ?? (env.CORRAL_PROXY_PORT ? Number(env.CORRAL_PROXY_PORT) : undefined)
  return Object.freeze({
    dataDir,
    dbUrl: options.dbUrl ?? defaultStoreUrl(dataDir),
    host: options.host,
    port: options.port,
    // Port 0 for the API (tests, parallel serves) means a free port for the proxy too.
    proxyPort: explicitProxyPort ?? (options.port === 0 ? 0 : DEFAULT_PROXY_PORT),
    env,
    runtime,
    allowUnenforcedLimits: options.allowUnenforcedLimits === true || env.CORRAL_ALLOW_UNENFORCED_LIMITS === '1',
    limits,
    ...sandboxUidFromEnv(env),
    runtimeSettings: runtimeSettings(runtime, env, limits),
    agentCommand: env.CORRAL_AGENT_COMMAND ? agentCommandFromEnv(env.CORRAL_AGENT_COMMAND) : defaultAgentCommand(),
    agentEnv: env.CORRAL_AGENT_MAX_ITERATIONS ? { CORRAL_MAX_ITERATIONS: env.CORRAL_AGENT_MAX_ITERATIONS } : undefined,
    taskRateLimit: taskRateFromEnv(env),
    upstreamCaFiles: (env.CORRAL_UPSTREAM_CA ?? '').split(',').map((f) => f.trim()).filter(Boolean),
    packArchiveLimits: archiveLimitsFromEnv(env),
    packRegistry: registrySettingsFromEnv(env),
    oidc: oidcConfigFromEnv(env),
    ownerEmail: env.CORRAL_OWNER_EMAIL,
    leaseTtlMs: leaseTtlMs(options.leaseTtl ?? env.CORRAL_LEASE_TTL),
    drainDelayMs: drainDelayMs(env.CORRAL_DRAIN_DELAY_MS),
    publicUrl: publicUrlOf(options.publicUrl ?? env.CORRAL_PUBLIC_URL),
    auditJournal: journalSettingsFromEnv(env),
    oauthAllowPrivate: oauthAllowPrivate(env),
    auditLog: {
      witnessDir: env.CORRAL_AUDIT_WITNESS_DIR ? resolve(env.CORRAL_AUDIT_WITNESS_DIR) : undefined,
      appendIntervalMs: positiveMs(env, 'CORRAL_AUDIT_APPEND_INTERVAL_MS', 1_000),
      checkpointIntervalMs: positiveMs(env, 'CORRAL_AUDIT_CHECKPOINT_INTERVAL_MS', 60_000),
    },
    auditSinks: { sinks: auditSinksFromEnv(env), deployment: env.CORRAL_DEPLOYMENT || undefined },
  })
}

function positiveMs(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const n = Number(raw)
  if (!Number.isInteger(n) || n < 10) throw new Error(`${name} must be a whole number of milliseconds, at least 10 (got ${JSON.stringify(raw)})`)
  return n
}

function agentCommandFromEnv(raw: string): string[] {
  let parsed: unknown
  try {
    parsed = JSON.parse(raw)
  } catch {
    parsed = undefined
  }
  if (!Array.isArray(parsed) || parsed.length === 0 || !parsed.every((a) => typeof a === 'string')) {
    throw new Error(`CORRAL_AGENT_COMMAND must be a JSON array of strings, got ${JSON.stringify(raw)}`)
  }
  return parsed
}

/** The range of agents' host uids when CORRAL_SANDBOX_UID_COUNT is unset: room for as many workspaces. */
export const DEFAULT_SANDBOX_UID_COUNT = 100_000_000

/**
 * CORRAL_SANDBOX_UID (the range's first uid, DEFAULT_SANDBOX_UID) and CORRAL_SANDBOX_UID_COUNT
 * (its size, at least 2: the driver's own and one workspace's): docs/runtime.md "One uid per workspace".
 */
export function sandboxUidFromEnv(env: NodeJS.ProcessEnv): { sandboxUid: number; sandboxUidCount: number } {
  const raw = env.CORRAL_SANDBOX_UID?.trim()
  const first = raw ? Number(raw) : DEFAULT_SANDBOX_UID
  if (!Number.isInteger(first) || first < 1 || first > 0xfffffffd) throw new Error(`CORRAL_SANDBOX_UID must be a uid above 0, got ${JSON.stringify(raw)}`)
  const rawCount = env.CORRAL_SANDBOX_UID_COUNT?.trim()
  const count = rawCount ? Number(rawCount) : Math.min(DEFAULT_SANDBOX_UID_COUNT, 0xfffffffe - first + 1)
  if (!Number.isInteger(count) || count < 2 || first + count - 1 > 0xfffffffe) {
    throw new Error(`CORRAL_SANDBOX_UID_COUNT must be a whole number ≥ 2 with CORRAL_SANDBOX_UID + count - 1 ≤ 4294967294, got ${JSON.stringify(rawCount)}`)
  }
  return { sandboxUid: first, sandboxUidCount: count }
}

/** CORRAL_TASK_RATE_BURST (default 30) and CORRAL_TASK_RATE_PER_SECOND (default 0.5); either 0 disables. */
export function taskRateFromEnv(env: NodeJS.ProcessEnv): { capacity: number; refillPerSecond: number } | false {
  const burst = env.CORRAL_TASK_RATE_BURST === undefined || env.CORRAL_TASK_RATE_BURST === '' ? 30 : Number(env.CORRAL_TASK_RATE_BURST)
  const rate = env.CORRAL_TASK_RATE_PER_SECOND === undefined || env.CORRAL_TASK_RATE_PER_SECOND === '' ? 0.5 : Number(env.CORRAL_TASK_RATE_PER_SECOND)
  if (!Number.isFinite(burst) || !Number.isFinite(rate) || burst < 0 || rate < 0) {
    throw new Error('CORRAL_TASK_RATE_BURST and CORRAL_TASK_RATE_PER_SECOND must be non-negative numbers')
  }
  return burst === 0 || rate === 0 ? false : { capacity: Math.max(1, Math.floor(burst)), refillPerSecond: rate }
}

/** `--lease-ttl` / CORRAL_LEASE_TTL: seconds (fractions allowed), 0.5 to 300; default 15. */
/** CORRAL_DRAIN_DELAY_MS: whole milliseconds from 0 (the default: close at once) to 60000. */
export function drainDelayMs(raw: string | undefined): number {
  if (raw === undefined || raw.trim() === '') return 0
  const value = Number(raw)
  if (!Number.isInteger(value) || value < 0 || value > 60_000) throw new Error(`CORRAL_DRAIN_DELAY_MS must be whole milliseconds from 0 to 60000, got ${JSON.stringify(raw)}`)
  return value
}

/** An absolute http(s) base URL without query or fragment (the OAuth callback hangs under it), or unset. */
export function publicUrlOf(raw: string | undefined): string | undefined {
  if (raw === undefined || raw.trim() === '') return undefined
  let u: URL | undefined
  try {
    u = new URL(raw.trim())
  } catch {
    u = undefined
  }
  if (!u || !/^https?:$/.test(u.protocol) || u.search || u.hash || u.username || u.password) {
    throw new Error(`--public-url / CORRAL_PUBLIC_URL must be an absolute http(s) URL without query, fragment or credentials, got ${JSON.stringify(raw)}`)
  }
  return u.href.replace(/\/+$/, '')
}
