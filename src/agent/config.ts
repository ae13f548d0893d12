import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls'
import { Agent as UndiciAgent, Dispatcher, ProxyAgent } from 'undici'
import { PROVIDER_KINDS, type ProviderKind } from './model.js'
// The task's words straight from their file, not the contract's face: the face loads uuid (~15 ms),
// and the agent's start-up is every task's (bench:workspaces "agent cold start").
import { AGENT_KIND_PROVIDERS } from '../contract/resources.js'
import { type AgentDefaults, ENVIRONMENTS, type Environment, THINKING_EFFORTS, type ThinkingEffort } from '../contract/agent-task.js'

/**
 * Everything `corral agent` is told through its environment. The runtime sets the CORRAL_PROXY_*
 * and workspace variables; the control plane adds the role's provider and settings.
 */
export interface AgentConfig {
  provider: ProviderKind
  /** Anthropic: https://api.anthropic.com; OpenAI-compatible: the base including /v1. */
  baseUrl: string
  model: string
  /** Normally absent: the proxy's auth transform injects the provider credential. */
  apiKey?: string
  workspaceDir: string
  /** Base URL of the agent callback, reached through the proxy: `<eventsUrl>/task/<id>/event`. */
  eventsUrl: string
  proxyUrl?: string
  proxyToken?: string
  /** Extra CA (the corral CA) to trust for TLS through the proxy. */
  caFile?: string
  taskFile?: string
  defaults: Partial<AgentDefaults>
  maxIterations?: number
}

const DEFAULT_BASE_URLS: Readonly<Record<ProviderKind, string>> = {
  anthropic: 'https://api.anthropic.com',
  openai: 'https://api.openai.com/v1',
  gemini: 'https://generativelanguage.googleapis.com',
}

const REFERENCE_PROVIDER_KINDS: readonly ProviderKind[] = AGENT_KIND_PROVIDERS.corral

export const DEFAULT_EVENTS_URL = 'https://corral.internal'
/** The task file the runtime hands over in the agent's inbox (CORRAL_INBOX) when CORRAL_TASK_FILE is not set. */
export const TASKS_FILE = 'tasks.json'

/** Reads the agent's configuration; every problem is listed at once, by variable name. */
export function configFromEnv(env: NodeJS.ProcessEnv = process.env): AgentConfig {
  const problems: string[] = []
  const provider = (env.CORRAL_PROVIDER_KIND ?? 'anthropic') as ProviderKind
  // The reference agent speaks Anthropic Messages and OpenAI Chat; a CLI's adapter checks its own (kinds/).
  const kinds = env.CORRAL_AGENT_KIND ? PROVIDER_KINDS : REFERENCE_PROVIDER_KINDS
  if (!kinds.includes(provider)) problems.push(`CORRAL_PROVIDER_KIND must be one of ${kinds.join(', ')}`)
  const baseUrl = env.CORRAL_PROVIDER_BASE_URL ?? DEFAULT_BASE_URLS[provider] ?? 'https://api.anthropic.com'
  const model = env.CORRAL_MODEL ?? ''
  if (model === '') problems.push('CORRAL_MODEL is not set (the role\'s model, or the provider\'s default)')
  const int = (name: string): number | undefined => {
    const raw = env[name]
    if (raw === undefined || raw === '') return undefined
    const n = Number(raw)
    if (!Number.isInteger(n) || n < 0) {
      problems.push(`${name} must be a non-negative integer`)
      return undefined
    }
    return n
  }
  const effort = env.CORRAL_THINKING_EFFORT as ThinkingEffort | undefined
  if (effort !== undefined && effort !== '' as string && !THINKING_EFFORTS.includes(effort)) problems.push(`CORRAL_THINKING_EFFORT must be one of ${THINKING_EFFORTS.join(', ')}`)
  const environment = env.CORRAL_ENVIRONMENT as Environment | undefined
  if (environment !== undefined && environment !== '' as string && !ENVIRONMENTS.includes(environment)) problems.push(`CORRAL_ENVIRONMENT must be one of ${ENVIRONMENTS.join(', ')}`)
  const defaults: Partial<AgentDefaults> = {}
  if (effort) defaults.thinking_effort = effort
  if (environment) defaults.environment = environment
  if (env.CORRAL_ENVIRONMENT_DESCRIPTION) defaults.environment_description = env.CORRAL_ENVIRONMENT_DESCRIPTION
  const continuations = int('CORRAL_MAX_CONTINUATIONS')
  if (continuations !== undefined) defaults.max_continuations = continuations
  const context = int('CORRAL_MAX_CONTEXT_TOKENS')
  if (context !== undefined) defaults.max_context_tokens = context
  const maxIterations = int('CORRAL_MAX_ITERATIONS')
  if (problems.length > 0) throw new Error(`corral agent is not configured: ${problems.join('; ')}`)
  return {
    provider,
    baseUrl,
    model,
    ...(env.CORRAL_MODEL_API_KEY ? { apiKey: env.CORRAL_MODEL_API_KEY } : {}),
    workspaceDir: env.CORRAL_WORKSPACE_DIR ?? '/data',
    eventsUrl: env.CORRAL_EVENTS_URL ?? DEFAULT_EVENTS_URL,
    ...(env.CORRAL_PROXY_URL || env.HTTPS_PROXY ? { proxyUrl: env.CORRAL_PROXY_URL ?? env.HTTPS_PROXY } : {}),
    ...(env.CORRAL_PROXY_TOKEN ? { proxyToken: env.CORRAL_PROXY_TOKEN } : {}),
    ...(env.CORRAL_CA_FILE ? { caFile: env.CORRAL_CA_FILE } : {}),
    // CORRAL_TASK_SOURCE=http: a warm agent started before its task exists asks the control plane
    // (`GET <events url>/tasks/next`) even though the runtime gave it an inbox.
    ...(env.CORRAL_TASK_SOURCE !== 'http' && (env.CORRAL_TASK_FILE || env.CORRAL_INBOX) ? { taskFile: env.CORRAL_TASK_FILE || join(env.CORRAL_INBOX!, TASKS_FILE) } : {}),
    defaults,
    ...(maxIterations !== undefined ? { maxIterations } : {}),
  }
}

/**
 * One HTTP client for model calls and events: through the proxy with the capability token as
 * `Proxy-Authorization: Bearer`, trusting the corral CA that signs the proxy's leaf certificates.
 */
export function createDispatcher(config: Pick<AgentConfig, 'proxyUrl' | 'proxyToken' | 'caFile'>): Dispatcher {
  return new TokenDispatcher(config)
}

/**
 * Delegates to a proxy client built for the current capability token. A warm agent starts with a
 * workspace token and adopts the task's own token when the task is handed over (`proxy_token` in
 * the task, docs/agent.md), so its traffic is attributed to and budgeted on that task.
 */
export class TokenDispatcher extends Dispatcher {
  readonly #config: Pick<AgentConfig, 'proxyUrl' | 'proxyToken' | 'caFile'>
  #inner: Dispatcher
  #token: string | undefined
  /** Clients of earlier tokens, closed shortly after the switch (or with this dispatcher). */
  readonly #retired = new Set<Dispatcher>()
  readonly #retireAfterMs: number

  /** `retireAfterMs`: how long a replaced token's client lives on (default RETIRE_AFTER_MS; tests). */
  constructor(config: Pick<AgentConfig, 'proxyUrl' | 'proxyToken' | 'caFile'>, retireAfterMs = RETIRE_AFTER_MS) {
    super()
    this.#config = config
    this.#retireAfterMs = retireAfterMs
    this.#token = config.proxyToken
    this.#inner = proxyClient(config)
  }

  /**
   * Later requests carry `token`; requests in flight finish on the old client, which closes a
   * moment later: its teardown would otherwise run between the hand-over and the task's first
   * events, the path a warm claim is measured on.
   */
  useToken(token: string): void {
    // The same token again (handed ahead, then with the task) keeps the client and its tunnels.
    if (token === this.#token) return
    this.#token = token
    const old = this.#inner
    this.#inner = proxyClient({ ...this.#config, proxyToken: token })
    this.#retired.add(old)
    setTimeout(() => void this.#retire(old), this.#retireAfterMs).unref()
  }

  #retire(client: Dispatcher): Promise<void> {
    if (!this.#retired.delete(client)) return Promise.resolve()
    return client.close().catch(() => undefined)
  }

  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    return this.#inner.dispatch(options, handler)
  }

  override close(): Promise<void>
  override close(callback: () => void): void
  override close(callback?: () => void): Promise<void> | void {
    const p = Promise.all([this.#inner.close(), ...[...this.#retired].map((c) => this.#retire(c))]).then(() => undefined)
    if (callback) void p.then(callback, callback)
    else return p
  }

  override destroy(): Promise<void>
  override destroy(err: Error | null): Promise<void>
  override destroy(callback: () => void): void
  override destroy(err: Error | null, callback: () => void): void
  override destroy(a?: Error | null | (() => void), b?: () => void): Promise<void> | void {
    const cb = typeof a === 'function' ? a : b
    const err = typeof a === 'function' ? null : a ?? null
    const retired = [...this.#retired]
    this.#retired.clear()
    const p = Promise.all([this.#inner.destroy(err), ...retired.map((c) => c.destroy(err).catch(() => undefined))]).then(() => undefined)
    if (cb) void p.then(cb, cb)
    else return p
  }
}

/** How long the client of a replaced token lives on (requests in flight on it finish first anyway). */
const RETIRE_AFTER_MS = 2_000

const trustContexts = new Map<string, SecureContext>()

/**
 * The TLS trust (system roots plus the corral CA) as one context per process. Given as `ca`,
 * tls.connect would parse every root certificate again for each new connection: ~30 ms on an idle
 * machine and several times that under load, paid by the first event after a warm agent's token
 * switch and by each new model connection (docs/runtime.md "Benchmark").
 */
function trustContext(caFile: string): SecureContext {
  let context = trustContexts.get(caFile)
  if (!context) {
    context = createSecureContext({ ca: [...rootCertificates, readFileSync(caFile, 'utf8')] })
    trustContexts.set(caFile, context)
  }
  return context
}

/**
 * Switches the agent to a handed-over capability token: its client (`TokenDispatcher`) and the
 * proxy variables (CORRAL_PROXY_TOKEN, HTTPS_PROXY and friends) its tools inherit.
 */
export function adoptProxyToken(dispatcher: Dispatcher, token: string, env: NodeJS.ProcessEnv = process.env): void {
  if (dispatcher instanceof TokenDispatcher) dispatcher.useToken(token)
  env.CORRAL_PROXY_TOKEN = token
  for (const name of ['HTTPS_PROXY', 'HTTP_PROXY', 'https_proxy', 'http_proxy']) {
    const value = env[name]
    if (!value) continue
    try {
      const url = new URL(value)
      if (url.password) {
        url.password = token
        env[name] = url.toString().replace(/\/$/, '')
      }
    } catch {
      // not a URL: left as it is
    }
  }
}

function proxyClient(config: Pick<AgentConfig, 'proxyUrl' | 'proxyToken' | 'caFile'>): Dispatcher {
  const secureContext = config.caFile ? trustContext(config.caFile) : undefined
  if (!config.proxyUrl) return new UndiciAgent(secureContext ? { connect: { secureContext } } : {})
  // The proxy variables carry the token as userinfo for generic tools; this client sends it as
  // Bearer instead, so the URL is stripped of credentials (the password is the token).
  const url = new URL(config.proxyUrl)
  const token = config.proxyToken ?? (url.password ? decodeURIComponent(url.password) : undefined)
  url.username = ''
  url.password = ''
  return new ProxyAgent({
    uri: url.toString(),
    // One connection per origin: the agent's requests to an origin are sequential (an event, then
    // the next), and a second request sent just as the first completes would otherwise open a new
    // tunnel (CONNECT and TLS through the sandbox relay) instead of reusing the idle one.
    connections: 1,
    ...(token ? { token: `Bearer ${token}` } : {}),
    ...(secureContext ? { requestTls: { secureContext } } : {}),
  })
}

/** What the control plane knows about a role and its provider, as the agent needs it. */
export interface AgentLaunchSettings {
  provider: { kind: ProviderKind; base_url?: string | null; default_model?: string | null }
  role: {
    model?: string | null
    thinking_effort?: ThinkingEffort | null
    max_continuations?: number | null
    max_context_tokens?: number | null
    environment?: Environment | null
    environment_description?: string | null
  }
  /** Base URL of the agent callback and task endpoint as the proxy serves it. */
  eventsUrl?: string
}

/**
 * The environment `corral agent` reads (the inverse of configFromEnv), for the control plane to
 * pass as `AgentLaunch.env`. Unset settings are left out so the agent's defaults apply.
 */
export function agentEnvironment(s: AgentLaunchSettings): Record<string, string> {
  const env: Record<string, string> = { CORRAL_PROVIDER_KIND: s.provider.kind }
  const model = s.role.model || s.provider.default_model
  if (model) env.CORRAL_MODEL = model
  if (s.provider.base_url) env.CORRAL_PROVIDER_BASE_URL = s.provider.base_url
  if (s.role.thinking_effort) env.CORRAL_THINKING_EFFORT = s.role.thinking_effort
  if (s.role.max_continuations != null) env.CORRAL_MAX_CONTINUATIONS = String(s.role.max_continuations)
  if (s.role.max_context_tokens != null) env.CORRAL_MAX_CONTEXT_TOKENS = String(s.role.max_context_tokens)
  if (s.role.environment) env.CORRAL_ENVIRONMENT = s.role.environment
  if (s.role.environment_description) env.CORRAL_ENVIRONMENT_DESCRIPTION = s.role.environment_description
  if (s.eventsUrl) env.CORRAL_EVENTS_URL = s.eventsUrl
  return env
}
