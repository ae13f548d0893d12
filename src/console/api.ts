// The console's /v1 client: fetch with the Bearer token, JSON in and out, every non-2xx answer an
// ApiFailure carrying the spec's error envelope. Same origin as the console, so no CORS and no
// cookies: the token lives in this tab's sessionStorage and goes out only in the Authorization header.
// (src/client/ is the CLI's client; its face loads node:fs for uploads, so the browser has its own.)
import type { ErrorEnvelope } from './wire.js'

export type Query = Record<string, string | number | boolean | readonly string[] | undefined>

export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly envelope: ErrorEnvelope,
  ) {
    super(envelope.message)
    this.name = 'ApiFailure'
  }

  get code(): string {
    return this.envelope.code
  }
}

/** `/v1${path}` with its query string (arrays repeat the parameter), relative to this origin. */
export function v1Url(path: string, query: Query = {}): string {
  const params = new URLSearchParams()
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined || value === '') continue
    if (Array.isArray(value)) for (const v of value) params.append(key, v)
    else params.set(key, String(value))
  }
  const qs = params.toString()
  return `/v1${path}${qs ? `?${qs}` : ''}`
}

export async function failureFrom(response: Response): Promise<ApiFailure> {
  const text = await response.text().catch(() => '')
  try {
    const body = JSON.parse(text) as { error?: ErrorEnvelope }
    if (body?.error && typeof body.error.code === 'string') return new ApiFailure(response.status, body.error)
  } catch {
    // not the envelope: synthesized below
  }
  return new ApiFailure(response.status, { code: `http_${response.status}`, message: `unexpected HTTP ${response.status} from the API` })
}

export class Api {
  /** `base`: the server's origin; '' (the default) is the page's own, as the console is served. */
  constructor(
    readonly token: string,
    readonly base = '',
  ) {}

  /** URL of a /v1 path on the server. */
  url(path: string, query?: Query): string {
    return `${this.base}${v1Url(path, query)}`
  }

  headers(extra: Record<string, string> = {}): Record<string, string> {
    return { authorization: `Bearer ${this.token}`, accept: 'application/json', ...extra }
  }

  /** Raw response of a GET (exports, streams); throws the envelope on non-2xx. */
  async raw(path: string, query?: Query, init: RequestInit & { headers?: Record<string, string> } = {}): Promise<Response> {
    const response = await fetch(this.url(path, query), { ...init, headers: this.headers(init.headers ?? {}) })
    if (!response.ok) throw await failureFrom(response)
    return response
  }

  async call<T>(method: string, path: string, opts: { query?: Query; body?: unknown; signal?: AbortSignal } = {}): Promise<T> {
    const hasBody = opts.body !== undefined
    const response = await fetch(this.url(path, opts.query), {
      method,
      headers: this.headers(hasBody ? { 'content-type': 'application/json' } : {}),
      body: hasBody ? JSON.stringify(opts.body) : undefined,
      signal: opts.signal,
    })
    if (!response.ok) throw await failureFrom(response)
    const text = await response.text()
    return (text === '' ? undefined : JSON.parse(text)) as T
  }

  /** A multipart/form-data request (pack archives); the browser sets the content type and boundary. */
  async upload<T>(method: 'POST' | 'PUT', path: string, form: FormData): Promise<T> {
    const response = await fetch(this.url(path), { method, headers: this.headers(), body: form })
    if (!response.ok) throw await failureFrom(response)
    return (await response.json()) as T
  }

  get<T>(path: string, query?: Query, signal?: AbortSignal): Promise<T> {
    return this.call<T>('GET', path, { query, signal })
  }

  post<T>(path: string, body?: unknown): Promise<T> {
    return this.call<T>('POST', path, { body: body ?? {} })
  }

  patch<T>(path: string, body: unknown): Promise<T> {
    return this.call<T>('PATCH', path, { body })
  }

  del<T>(path: string): Promise<T> {
    return this.call<T>('DELETE', path)
  }
}

/** A path segment, encoded. */
export const seg = (s: string): string => encodeURIComponent(s)
