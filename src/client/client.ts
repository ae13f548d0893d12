// The typed /v1 client: one method per route, Bearer auth, JSON in and out. Every non-2xx answer
// becomes an ApiError carrying the spec's envelope; an idempotent GET answered 429 is retried once
// after `Retry-After`. New routes get one method here, next to their wire types in ./types.ts.

import { ApiConnectionError, ApiError, apiErrorFrom } from './errors.js'
import type {
  ApiKey,
  AuditPage,
  AuditQuery,
  CreatedApiKey,
  Me,
  MemberRole,
  Membership,
  PermissionSet,
  StatsQuery,
  StatsResult,
} from './types.js'

export interface ClientOptions {
  /** Base URL of the service, with or without a trailing `/v1`. */
  readonly apiUrl: string
  readonly token: string
  readonly userAgent?: string
  /** Injected for tests; defaults to the global fetch. */
  readonly fetch?: typeof fetch
  /** Longest `Retry-After` the client waits for before giving up (seconds). */
  readonly maxRetryAfter?: number
}

export type QueryValue = string | number | boolean | readonly string[] | undefined

export interface RequestOptions {
  readonly query?: Record<string, QueryValue>
  readonly body?: unknown
  readonly signal?: AbortSignal
}

export class CorralClient {
  readonly apiUrl: string
  readonly #token: string
  readonly #fetch: typeof fetch
  readonly #userAgent: string
  readonly #maxRetryAfter: number

  constructor(options: ClientOptions) {
    this.apiUrl = normalizeApiUrl(options.apiUrl)
    this.#token = options.token
    this.#fetch = options.fetch ?? globalThis.fetch
    this.#userAgent = options.userAgent ?? 'corral-cli'
    this.#maxRetryAfter = options.maxRetryAfter ?? 60
  }

  /** Absolute URL of a /v1 path with its query string (repeatable parameters as arrays). */
  url(path: string, query?: Record<string, QueryValue>): URL {
    const url = new URL(`${this.apiUrl}/v1${path}`)
    for (const [key, value] of Object.entries(query ?? {})) {
      if (value === undefined) continue
      if (Array.isArray(value)) for (const v of value) url.searchParams.append(key, v)
      else url.searchParams.set(key, String(value))
    }
    return url
  }

  /** Headers every request carries; the SSE helper reuses them. The token never leaves this object otherwise. */
  headers(extra: Record<string, string> = {}): Record<string, string> {
    return { authorization: `Bearer ${this.#token}`, 'user-agent': this.#userAgent, accept: 'application/json', ...extra }
  }

  get fetchImpl(): typeof fetch {
    return this.#fetch
  }

  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const url = this.url(path, options.query)
    const hasBody = options.body !== undefined
    const init: RequestInit = {
      method,
      headers: this.headers(hasBody ? { 'content-type': 'application/json' } : {}),
      body: hasBody ? JSON.stringify(options.body) : undefined,
      signal: options.signal,
    }
    let response = await this.#send(url, init)
    // Only idempotent reads are retried, and only once: a write that hit the limit is reported.
    if (response.status === 429 && method === 'GET') {
      const error = await apiErrorFrom(response)
      const wait = error.retryAfter ?? 1
      if (wait > this.#maxRetryAfter) throw error
      await sleep(wait * 1000, options.signal)
      response = await this.#send(url, init)
    }
    if (!response.ok) throw await apiErrorFrom(response)
    if (response.status === 204) return undefined as T
    const text = await response.text()
    if (text === '') return undefined as T
    try {
      return JSON.parse(text) as T
    } catch {
      throw new ApiError(response.status, {
        code: 'invalid_response',
        message: `the API answered ${method} ${url.pathname} with a body that is not JSON`,
        ...(response.headers.get('x-request-id') ? { request_id: response.headers.get('x-request-id')! } : {}),
      })
    }
  }

  async #send(url: URL, init: RequestInit): Promise<Response> {
    try {
      return await this.#fetch(url, init)
    } catch (error) {
      if ((error as Error)?.name === 'AbortError') throw error
      throw new ApiConnectionError(this.apiUrl, error)
    }
  }

  // --- Identity -------------------------------------------------------------------------------

  /** Who this credential is and which org it acts in (any valid credential may ask). */
  me(): Promise<Me> {
    return this.request('GET', '/me')
  }

  // --- API keys -------------------------------------------------------------------------------

  createApiKey(input: { label: string; permission_set: PermissionSet }): Promise<CreatedApiKey> {
    return this.request('POST', '/api-keys', { body: input })
  }

  async listApiKeys(): Promise<ApiKey[]> {
    const body = await this.request<{ api_keys: ApiKey[] }>('GET', '/api-keys')
    return body.api_keys
  }

  revokeApiKey(id: string): Promise<{ status: 'revoked' }> {
    return this.request('DELETE', `/api-keys/${encodeURIComponent(id)}`)
  }

  // --- Audit ----------------------------------------------------------------------------------

  queryAudit(query: AuditQuery, scope: { workspaceId?: string } = {}): Promise<AuditPage> {
    return this.request('GET', `${workspacePrefix(scope.workspaceId)}/audit`, { query: { ...query } })
  }

  /** Follows cursors page by page until the last page (one without `cursor`). */
  async *auditPages(query: AuditQuery, scope: { workspaceId?: string } = {}): AsyncGenerator<AuditPage> {
    let cursor = query.cursor
    do {
      const page = await this.queryAudit({ ...query, cursor }, scope)
      yield page
      cursor = page.cursor
    } while (cursor)
  }

  auditStats(query: StatsQuery, scope: { workspaceId?: string } = {}): Promise<StatsResult> {
    return this.request('GET', `${workspacePrefix(scope.workspaceId)}/audit/stats`, { query: { ...query } })
  }

  /** URL of the live activity stream (org-wide, or one workspace's), filtered server-side. */
  activityStreamUrl(scope: { workspaceId?: string } = {}, filter?: readonly string[]): URL {
    return this.url(`${workspacePrefix(scope.workspaceId)}/activity/stream`, { filter })
  }

  // --- Memberships ----------------------------------------------------------------------------

  async listMembers(orgId: string): Promise<Membership[]> {
    const body = await this.request<{ memberships: Membership[] }>('GET', `/orgs/${encodeURIComponent(orgId)}/memberships`)
    return body.memberships
  }

  inviteMember(orgId: string, input: { email: string; role: MemberRole }): Promise<Membership> {
    return this.request('POST', `/orgs/${encodeURIComponent(orgId)}/memberships`, { body: input })
  }

  updateMember(orgId: string, userId: string, input: { role: MemberRole }): Promise<Membership> {
    return this.request('PATCH', `/orgs/${encodeURIComponent(orgId)}/memberships/${encodeURIComponent(userId)}`, { body: input })
  }

  removeMember(orgId: string, userId: string): Promise<unknown> {
    return this.request('DELETE', `/orgs/${encodeURIComponent(orgId)}/memberships/${encodeURIComponent(userId)}`)
  }
}

function workspacePrefix(workspaceId: string | undefined): string {
  return workspaceId ? `/workspaces/${encodeURIComponent(workspaceId)}` : ''
}

/** Accepts `http://host:7070`, `http://host:7070/` and `http://host:7070/v1`. */
export function normalizeApiUrl(raw: string): string {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new TypeError(`invalid API URL "${raw}": expected http(s)://host[:port]`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new TypeError(`invalid API URL "${raw}": expected http(s)://host[:port]`)
  }
  let path = url.pathname.replace(/\/+$/, '')
  if (path.endsWith('/v1')) path = path.slice(0, -3)
  return `${url.origin}${path}`
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms)
    signal?.addEventListener('abort', () => {
      clearTimeout(timer)
      reject(signal.reason)
    }, { once: true })
  })
}
