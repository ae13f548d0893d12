// The proxy as a service with start/stop: what `corral serve` runs on `--proxy-port` and
// `corral proxy` runs alone. Everything shared (CA, token key, pooled upstream agent, active
// workspaces) is built once here.
import type { AuditSink } from '../contract/index.js'
import type { ResolverLimits } from '../dns/index.js'
import { compilePolicyCached } from '../policy/index.js'
import type { CompileResult } from '../policy/index.js'
import { budgetLedgers, type Store } from '../store/index.js'
import type { AgentCallbacks } from './agent-callback-handler.js'
import { LeafMinter, loadOrCreateCa, type CorralCa } from './ca.js'
import { providerPlacement } from './credential-injection.js'
import { ProxyFront } from './front.js'
import { AuditGate } from './audit-gate.js'
import { resolveLimits, type ProxyLimits } from './limits.js'
import type { ProxyCore, ProxyCounters, ProxyLog } from './request-state.js'
import { TASK_ENDED_CHANNEL, TaskLiveness } from './task-liveness.js'
import { CREDENTIALS_CHANNEL, OAuthHttp, OAuthMinter, oauthAllowPrivate, OrgSecrets, SECRETS_CHANNEL, Sealer, StaticCredentialBroker, loadMasterKey, type CredentialBroker, type SecretsSource } from '../secrets/index.js'
import { Budgets, type ConcurrencyPermitSource } from './budgets.js'
import { CapabilityTokens, loadTokenKey } from '../secrets/index.js'
import { RowAllowance } from './row-allowance.js'
import { Upstream } from './upstream.js'
import { AddressGuard, type Endpoint } from '../net/index.js'
import type { LookupAddress } from 'node:dns'
import { ActiveWorkspaces, type WorkspaceDirectory } from './workspaces.js'

export const DEFAULT_PROXY_PORT = 7071
/** Largest request body buffered for inspection (schema, body CEL, body transforms). */
export const DEFAULT_MAX_INSPECT_BYTES = 8 * 1024 * 1024

export interface ProxyServiceOptions {
  store: Store
  audit: AuditSink
  dataDir: string
  /** `max_concurrent` permits in the database, shared by every replica (budgets.ts); unset: per process. */
  permits?: ConcurrencyPermitSource
  /** Compiles a role's caps.yaml text; defaults to the policy module's cached compiler. */
  compile?: (capabilities: string) => CompileResult
  port?: number
  host?: string
  /** Extra PEM roots for upstream verification (`--upstream-ca`). */
  upstreamCaPem?: string[]
  workspaceTtlMs?: number
  maxInspectBytes?: number
  directory?: WorkspaceDirectory
  secrets?: SecretsSource
  credentials?: CredentialBroker
  /** Seals org material; loaded from CORRAL_MASTER_KEY / <dataDir>/master.key when absent. */
  sealer?: Sealer
  /** The corral CA that signs the leaf certificates; loaded from (or created in) `dataDir` when absent. */
  ca?: CorralCa
  /** Verifies capability tokens; built from the store's token key when absent. */
  tokens?: CapabilityTokens
  /** serve's other listeners (API, database, …), never reachable through the proxy; read at each connect. */
  ownEndpoints?: () => readonly Endpoint[]
  /** Limits of each workspace's resolver (src/dns/); default DEFAULT_RESOLVER_LIMITS. */
  resolverLimits?: Partial<ResolverLimits>
  /** Resolver of upstream names (tests: a rebinding resolver); default dns.lookup. */
  resolve?: (hostname: string) => Promise<LookupAddress[]>
  /** Resource limits: defaults, then `env` (CORRAL_PROXY_*, limits.ts), then these values. */
  limits?: Partial<ProxyLimits>
  env?: Record<string, string | undefined>
  /** Where the proxy reports its own faults; console when absent. */
  logger?: ProxyLog
  /** The handler of agent callbacks to `corral.internal` (the workspace lifecycle's); agent-callbacks.ts. */
  agentCallbacks?: AgentCallbacks
}

const consoleLog: ProxyLog = {
  error: (obj, msg) => console.error(msg, obj),
  warn: (obj, msg) => console.warn(msg, obj),
}

export class ProxyService {
  readonly name = 'proxy'
  readonly #opts: ProxyServiceOptions
  #front: ProxyFront | undefined
  #core: ProxyCore | undefined
  #ca: CorralCa | undefined
  #unlisten: Array<() => Promise<void>> = []
  #stopping: Promise<void> | undefined
  port: number | undefined

  constructor(opts: ProxyServiceOptions) {
    this.#opts = opts
  }

  get workspaces(): ActiveWorkspaces {
    if (!this.#core) throw new Error('proxy not started')
    return this.#core.workspaces
  }

  get tokens(): CapabilityTokens {
    if (!this.#core) throw new Error('proxy not started')
    return this.#core.tokens
  }

  get ca(): CorralCa {
    if (!this.#ca) throw new Error('proxy not started')
    return this.#ca
  }

  /** Counters since start: tunnels, requests, refused connections, transport errors, faults (request-state.ts). */
  stats(): ProxyCounters {
    return { ...(this.#front?.stats ?? newCounters()) }
  }

  async start(): Promise<number> {
    const o = this.#opts
    // Bad limit values refuse the start, naming the variable, before anything is opened.
    const limits = resolveLimits(o.env ?? {}, o.limits)
    this.#ca = o.ca ?? await loadOrCreateCa(o.dataDir)
    const tokens = o.tokens ?? new CapabilityTokens(await loadTokenKey(o.store.settings))
    const tables = o.store.proxy
    const directory = o.directory ?? tables.workspaces
    const sealer = o.sealer ?? new Sealer(await loadMasterKey(o.dataDir))
    const secrets = o.secrets ?? new OrgSecrets(tables, sealer)
    // OAuth credentials mint access tokens from the provider's token endpoint, trusting the same extra
    // roots as upstreams, through the same address guard (private ranges: CORRAL_OAUTH_ALLOW_PRIVATE only).
    const oauthHttp = new OAuthHttp({ ...(o.upstreamCaPem ? { extraCaPem: o.upstreamCaPem } : {}), guard: this.#guard(), allowPrivate: oauthAllowPrivate(o.env ?? {}) })
    this.#unlisten.push(() => oauthHttp.close())
    const credentials = o.credentials ?? new StaticCredentialBroker(tables, sealer, new OAuthMinter({
      tables: o.store.oauth, store: o.store, sealer, audit: o.audit, http: oauthHttp, notify: (channel, payload) => o.store.notify(channel, payload),
    }))
    // The control plane announces changes (payload: org id); every proxy process drops its copy.
    if (secrets instanceof OrgSecrets) this.#unlisten.push(await o.store.listen(SECRETS_CHANNEL, (orgId) => secrets.invalidate(orgId)))
    if (credentials instanceof StaticCredentialBroker) this.#unlisten.push(await o.store.listen(CREDENTIALS_CHANNEL, (orgId) => credentials.invalidate(orgId)))
    const budgets = new Budgets(budgetLedgers(o.store), o.permits)
    const log = o.logger ?? consoleLog
    const counters = newCounters()
    // Task tokens stop at their task's end: the controller announces it (task-liveness.ts).
    const tasks = new TaskLiveness(tables.tasks)
    this.#unlisten.push(await o.store.listen(TASK_ENDED_CHANNEL, (key) => tasks.ended(key)))
    const core: ProxyCore = {
      tokens,
      tasks,
      budgets,
      workspaces: new ActiveWorkspaces({
        directory, compile: o.compile ?? compilePolicyCached, audit: o.audit, onTeardown: (id) => {
          this.#front?.egress.forget(id)
          return budgets.close(id).catch(() => {})
        },
        onAuditError: (err, type) => {
          counters.auditFailures++
          log.error({ err: { message: (err as Error)?.message ?? String(err) }, type }, 'proxy: the audit sink refused a workspace lifecycle row')
        },
        ...(o.workspaceTtlMs ? { ttlMs: o.workspaceTtlMs } : {}),
      }),
      audit: o.audit,
      upstream: new Upstream({ ...(o.upstreamCaPem ? { extraCaPem: o.upstreamCaPem } : {}), guard: this.#guard() }),
      maxInspectBytes: o.maxInspectBytes ?? DEFAULT_MAX_INSPECT_BYTES,
      limits,
      log,
      counters,
      auditGate: new AuditGate(o.audit),
      challengeRows: new RowAllowance(limits.transportRowsPerSecond, () => counters.transportRowsSuppressed++),
      placements: providerPlacement,
      secrets,
      credentials,
      ...(o.agentCallbacks ? { agentCallbacks: o.agentCallbacks } : {}),
      ...(o.resolverLimits ? { resolverLimits: o.resolverLimits } : {}),
    }
    this.#core = core
    this.#front = new ProxyFront(core, new LeafMinter(this.#ca))
    this.port = await this.#front.listen(o.port ?? DEFAULT_PROXY_PORT, o.host ?? '127.0.0.1')
    return this.port
  }

  /** The proxy's own port and serve's other listeners are refused whatever a policy says. */
  #guard(): AddressGuard {
    const o = this.#opts
    const own = (): Endpoint[] => [
      ...(this.port !== undefined ? [{ host: o.host ?? '127.0.0.1', port: this.port }] : []),
      ...(o.ownEndpoints?.() ?? []),
    ]
    return new AddressGuard(own, o.resolve)
  }

  /**
   * Drains: stops accepting, lets requests in flight finish within limits.drainMs, then cuts what
   * is left; every request handed its row to the audit sink before this resolves. Idempotent.
   */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      await this.#front?.close()
      for (const un of this.#unlisten.splice(0)) await un().catch(() => {})
      this.#core?.workspaces.close()
      const upstream = this.#core?.upstream
      if (upstream) {
        // Nothing is in flight any more; a pooled connection that does not close in time is destroyed.
        const closed = await within(upstream.close().then(() => true, () => true), this.#core!.limits.drainMs, false)
        if (!closed) await upstream.destroy().catch(() => {})
      }
      await this.#core?.budgets?.close()
      this.#front = undefined
    })()
    return this.#stopping
  }
}

/**
 * `p`, or `fallback` after `ms`. The bound's timer keeps the process alive while it runs (an
 * unreferenced one bounds nothing once the loop is otherwise idle) and is cleared when `p` wins.
 */
async function within<T>(p: Promise<T>, ms: number, fallback: T): Promise<T> {
  let t: NodeJS.Timeout | undefined
  try {
    return await Promise.race([p, new Promise<T>((r) => (t = setTimeout(() => r(fallback), ms)))])
  } finally {
    clearTimeout(t)
  }
}

function newCounters(): ProxyCounters {
  return { tunnels: 0, requests: 0, auditFailures: 0, connectionsRefused: 0, transportErrors: 0, transportRowsSuppressed: 0, handlerFaults: 0, storeUnavailable: 0 }
}
