// Workspace activation: the proxy's in-memory state per workspace (compiled policy, budget
// handle), loaded on the first request that names it, torn down on stop/archive, aged out after a
// TTL. The data comes through the WorkspaceDirectory seam; the workspace issue only has to keep
// the directory's rows current and call `deactivate` (or publish on the store's bus) on stop.
import type { AuditSink } from '../contract/index.js'
import type { CompiledPolicy, CompileResult } from '../policy/index.js'

/** What the proxy needs to know about a workspace. */
export interface WorkspaceRecord {
  id: string
  org_id: string
  creator_user_id: string
  role: string
  provider: string
  environment: string
  /** The role's caps.yaml text; null or empty means no policy attached. */
  capabilities: string | null
  state: string
}

export interface WorkspaceDirectory {
  lookup(workspaceId: string): Promise<WorkspaceRecord | undefined>
}

/** Workspace states in which the proxy refuses to activate (the workspace is torn down). */
const INACTIVE_STATES = new Set(['stopping', 'stopped', 'archived'])

export type PolicyState =
  | { kind: 'ok'; policy: CompiledPolicy }
  | { kind: 'none' }
  /** The text no longer compiles (the role was edited around the save-time check). */
  | { kind: 'error'; message: string }

export class ActiveWorkspace {
  #active = true
  /** Its role or provider changed: the next request loads the record and policy again. */
  stale = false
  lastUsed = Date.now()
  /** Requests currently inside the pipeline; eviction waits for zero. */
  inFlight = 0
  /** What `get` answers for this workspace while it is active (one object, not one per request). */
  readonly activation: ActivationResult

  constructor(
    readonly record: WorkspaceRecord,
    readonly policy: PolicyState,
  ) {
    this.activation = { ok: true, workspace: this }
  }

  get active(): boolean {
    return this.#active
  }

  /** @internal called by the registry */
  tearDown(): void {
    this.#active = false
  }
}

export type ActivationResult =
  | { ok: true; workspace: ActiveWorkspace }
  | { ok: false; reason: 'workspace_not_activated' }

const NOT_ACTIVATED: ActivationResult = Object.freeze({ ok: false, reason: 'workspace_not_activated' })

export interface ActiveWorkspacesOptions {
  directory: WorkspaceDirectory
  compile: (capabilities: string) => CompileResult
  audit: AuditSink
  /** Idle time after which state is evicted (workspace_evicted). Default 30 minutes. */
  ttlMs?: number
  /** Called after a workspace's state is torn down (budget leases are returned there). */
  onTeardown?: (workspaceId: string) => Promise<void> | void
  /** Where a lifecycle row the sink refused is reported (these run from timers and bus callbacks). */
  onAuditError?: (err: unknown, type: string) => void
}

export class ActiveWorkspaces {
  readonly #opts: ActiveWorkspacesOptions
  readonly #ttlMs: number
  readonly #byId = new Map<string, ActiveWorkspace>()
  readonly #loading = new Map<string, Promise<ActivationResult>>()
  #sweeper: NodeJS.Timeout | undefined

  constructor(opts: ActiveWorkspacesOptions) {
    this.#opts = opts
    this.#ttlMs = opts.ttlMs ?? 30 * 60 * 1000
    this.#sweeper = setInterval(() => void this.sweep(), Math.min(60_000, Math.max(250, this.#ttlMs / 4)))
    this.#sweeper.unref()
  }

  /** The active state for the token's workspace, activating it on first use (a promise only then). */
  get(orgId: string, workspaceId: string): ActivationResult | Promise<ActivationResult> {
    const ws = this.#byId.get(workspaceId)
    if (ws && !ws.stale && ws.record.org_id === orgId) {
      ws.lastUsed = Date.now()
      return ws.activation
    }
    if (ws && !ws.stale) return NOT_ACTIVATED
    return this.#activate(orgId, workspaceId)
  }

  #activate(orgId: string, workspaceId: string): Promise<ActivationResult> {
    let p = this.#loading.get(workspaceId)
    if (!p) {
      p = this.#load(workspaceId).finally(() => this.#loading.delete(workspaceId))
      this.#loading.set(workspaceId, p)
    }
    return p.then((r) => (r.ok && r.workspace.record.org_id !== orgId ? { ok: false, reason: 'workspace_not_activated' } : r))
  }

  async #load(workspaceId: string): Promise<ActivationResult> {
    const record = await this.#opts.directory.lookup(workspaceId)
    if (!record || INACTIVE_STATES.has(record.state)) return { ok: false, reason: 'workspace_not_activated' }
    const text = record.capabilities?.trim() ? record.capabilities : null
    let policy: PolicyState
    if (text === null) policy = { kind: 'none' }
    else {
      const compiled = this.#opts.compile(text)
      policy = compiled.ok
        ? { kind: 'ok', policy: compiled.policy }
        : { kind: 'error', message: compiled.diagnostics.find((d) => d.severity === 'error')?.message ?? 'policy does not compile' }
    }
    const ws = new ActiveWorkspace(record, policy)
    this.#byId.set(workspaceId, ws)
    await this.#lifecycle('workspace_activated', ws)
    return { ok: true, workspace: ws }
  }

  /** A role or provider of the org changed (on any replica): its workspaces load their policy again on their next request; requests in flight finish under the old one. */
  refreshOrg(orgId: string): void {
    for (const ws of this.#byId.values()) if (ws.record.org_id === orgId) ws.stale = true
  }

  /** Tears a workspace's state down (stop/archive). Requests in flight see `workspace_gone`. */
  async deactivate(workspaceId: string): Promise<boolean> {
    const ws = this.#byId.get(workspaceId)
    if (!ws) return false
    this.#byId.delete(workspaceId)
    ws.tearDown()
    await this.#lifecycle('workspace_deactivated', ws)
    await Promise.resolve(this.#opts.onTeardown?.(workspaceId)).catch(() => {})
    return true
  }

  /** Evicts idle workspaces past the TTL (nothing in flight). Returns how many were evicted. */
  async sweep(now = Date.now()): Promise<number> {
    let n = 0
    for (const [id, ws] of this.#byId) {
      if (ws.inFlight === 0 && now - ws.lastUsed >= this.#ttlMs) {
        this.#byId.delete(id)
        ws.tearDown()
        await this.#lifecycle('workspace_evicted', ws)
        await Promise.resolve(this.#opts.onTeardown?.(id)).catch(() => {})
        n++
      }
    }
    return n
  }

  has(workspaceId: string): boolean {
    return this.#byId.has(workspaceId)
  }

  close(): void {
    if (this.#sweeper) clearInterval(this.#sweeper)
    this.#sweeper = undefined
  }

  async #lifecycle(type: 'workspace_activated' | 'workspace_deactivated' | 'workspace_evicted', ws: ActiveWorkspace): Promise<void> {
    const r = ws.record
    // Called from the sweep timer and the stop channel's callback: a refused row is reported,
    // never an unhandled rejection that would take the process down.
    await this.#opts.audit.emit({
      org_id: r.org_id,
      user_id: r.creator_user_id,
      event_type: type,
      workspace_id: r.id,
      agent_role: r.role,
      agent_provider: r.provider,
    }).catch((err: unknown) => this.#opts.onAuditError?.(err, type))
  }
}
