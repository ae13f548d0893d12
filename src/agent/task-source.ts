import { readFile } from 'node:fs/promises'
import { setTimeout as sleep } from 'node:timers/promises'
import { type Dispatcher, request } from 'undici'
import { adoptProxyToken } from './config.js'
import { ENVIRONMENTS, THINKING_EFFORTS, type AgentTask } from '../contract/agent-task.js' // not the face: see config.ts

/** Where the agent's tasks come from. The control plane's fetch-through-the-proxy endpoint is one; a file is another. */
export interface TaskSource {
  /** The next task, or null when there is none left (the agent then ends its session). */
  next(): Promise<AgentTask | null>
}

/** Tasks handed over in a file: one JSON task, a JSON array, or NDJSON (one task per line). */
export class FileTaskSource implements TaskSource {
  readonly #path: string
  #queue: AgentTask[] | null = null

  constructor(path: string) {
    this.#path = path
  }

  async next(): Promise<AgentTask | null> {
    this.#queue ??= parseTasks(await readFile(this.#path, 'utf8'), this.#path)
    return this.#queue.shift() ?? null
  }
}

/** Tasks given in memory (tests, embedding). */
export class ListTaskSource implements TaskSource {
  readonly #queue: AgentTask[]
  constructor(tasks: AgentTask[]) {
    this.#queue = tasks.map((t, i) => validateTask(t, `task[${i}]`))
  }
  async next(): Promise<AgentTask | null> {
    return this.#queue.shift() ?? null
  }
}

export function parseTasks(text: string, origin: string): AgentTask[] {
  const trimmed = text.trim()
  if (trimmed === '') return []
  let values: unknown[]
  try {
    const parsed: unknown = JSON.parse(trimmed)
    values = Array.isArray(parsed) ? parsed : [parsed]
  } catch {
    values = trimmed.split('\n').filter((l) => l.trim() !== '').map((line, i) => {
      try {
        return JSON.parse(line) as unknown
      } catch {
        throw new Error(`${origin}: line ${i + 1} is not JSON`)
      }
    })
  }
  return values.map((v, i) => validateTask(v, `${origin}: task ${i + 1}`))
}

function validateTask(value: unknown, where: string): AgentTask {
  const t = value as Partial<AgentTask> | null
  if (!t || typeof t !== 'object') throw new Error(`${where} is not an object`)
  if (typeof t.id !== 'string' || t.id === '') throw new Error(`${where}: id must be a non-empty string`)
  if (typeof t.description !== 'string' || t.description === '') throw new Error(`${where}: description must be a non-empty string`)
  if (t.thinking_effort !== undefined && !THINKING_EFFORTS.includes(t.thinking_effort)) throw new Error(`${where}: thinking_effort must be one of ${THINKING_EFFORTS.join(', ')}`)
  if (t.environment !== undefined && !ENVIRONMENTS.includes(t.environment)) throw new Error(`${where}: environment must be one of ${ENVIRONMENTS.join(', ')}`)
  for (const key of ['max_continuations', 'max_context_tokens'] as const) {
    const n = t[key]
    if (n !== undefined && (!Number.isInteger(n) || n < 0)) throw new Error(`${where}: ${key} must be a non-negative integer`)
  }
  return t as AgentTask
}

/**
 * Tasks fetched through the proxy from the control plane (warm workspaces whose agent starts
 * before any task exists; served by src/workspaces/agent-callbacks.ts):
 * `GET <base>/tasks/next` → 200 with one task (JSON), 204 when none is ready yet (the control
 * plane holds the request as a long poll; the agent asks again after `Retry-After` seconds, at
 * once for 0, after 1 s without the header), 404 or 410 when the workspace has no more work (the
 * agent ends its session). The capability token identifies the workspace.
 *
 * The agent asks with `?token=ahead`: when its workspace is claimed, the control plane first
 * answers 200 with only the claimed task's `proxy_token`; the agent adopts it (adoptProxyToken)
 * and asks again at once, so its tunnel with the task's token is open while the control plane
 * starts the task, and the task's first events need no new tunnel.
 */
export class HttpTaskSource implements TaskSource {
  readonly #url: string
  readonly #dispatcher: Dispatcher
  readonly #signal: AbortSignal | undefined
  readonly #pause: (ms: number, signal?: AbortSignal) => Promise<unknown>
  readonly #adoptToken: (token: string) => void

  constructor(baseUrl: string, dispatcher: Dispatcher, options: {
    signal?: AbortSignal
    pause?: (ms: number, signal?: AbortSignal) => Promise<unknown>
    /** Takes a token handed ahead of the task (default adoptProxyToken on this dispatcher). */
    adoptToken?: (token: string) => void
  } = {}) {
    this.#url = `${baseUrl.replace(/\/+$/, '')}/tasks/next`
    this.#dispatcher = dispatcher
    this.#signal = options.signal
    this.#pause = options.pause ?? ((ms, signal) => sleep(ms, undefined, { signal }).catch(() => undefined))
    this.#adoptToken = options.adoptToken ?? ((token) => adoptProxyToken(dispatcher, token))
  }

  async next(): Promise<AgentTask | null> {
    while (!this.#signal?.aborted) {
      const res = await request(`${this.#url}?token=ahead`, { method: 'GET', dispatcher: this.#dispatcher, headers: { accept: 'application/json' }, ...(this.#signal ? { signal: this.#signal } : {}) })
      const text = await res.body.text()
      if (res.statusCode === 200) {
        const ahead = tokenAhead(text)
        if (ahead === undefined) return parseTasks(text, this.#url)[0] ?? null
        this.#adoptToken(ahead)
        continue
      }
      if (res.statusCode === 404 || res.statusCode === 410) return null
      if (res.statusCode !== 204 && res.statusCode !== 429 && res.statusCode < 500) {
        throw new Error(`${this.#url} answered ${res.statusCode}: ${text.slice(0, 300)}`)
      }
      // `Retry-After: 0` (a long poll that timed out with nothing) asks again at once.
      const header = res.headers['retry-after']
      const retryAfter = typeof header === 'string' && header.trim() !== '' ? Number(header) : NaN
      if (retryAfter === 0) continue
      await this.#pause(Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : 1000, this.#signal)
    }
    return null
  }
}

/** The token of a `{ "proxy_token": … }` answer without a task; undefined for anything else. */
function tokenAhead(text: string): string | undefined {
  try {
    const v = JSON.parse(text) as { proxy_token?: unknown; id?: unknown } | null
    return v && typeof v === 'object' && !Array.isArray(v) && v.id === undefined && typeof v.proxy_token === 'string' && v.proxy_token !== '' ? v.proxy_token : undefined
  } catch {
    return undefined
  }
}
