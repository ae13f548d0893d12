// The agent's own output of a workspace (GET /v1/workspaces/{id}/logs): a page as NDJSON chunks,
// or followed live over SSE (`event: log`, `id: <seq>`) on the `eventsource` client, which
// reconnects by itself and resumes with Last-Event-ID. A refused connection (401, 403, 404) ends
// the stream with the server's error envelope, as the activity stream does.
import type { CorralClient } from './client.js'
import { ApiConnectionError, type ApiError, apiErrorFrom } from './errors.js'

export interface AgentLogChunk {
  seq: number
  at: string
  text: string
  /** Set on the first chunk after a resume point that retention already trimmed. */
  skipped?: boolean
}

export interface AgentLogPage {
  chunks: AgentLogChunk[]
  /** The seq to pass as `after` for the next page (the last chunk's, or `after` when none came). */
  next: number
  /** Older output was trimmed by the server's retention before this page. */
  truncated: boolean
}

export async function agentLogs(client: CorralClient, workspaceId: string, q: { after?: number; limitBytes?: number } = {}): Promise<AgentLogPage> {
  const url = client.url(`/workspaces/${encodeURIComponent(workspaceId)}/logs`, { format: 'ndjson', after: q.after, limit_bytes: q.limitBytes })
  let res: Response
  try {
    res = await client.fetchImpl(url, { headers: client.headers({ accept: 'application/x-ndjson' }) })
  } catch (err) {
    throw new ApiConnectionError(client.apiUrl, err)
  }
  if (!res.ok) throw await apiErrorFrom(res)
  const chunks = (await res.text()).split('\n').filter(Boolean).map((l) => JSON.parse(l) as AgentLogChunk)
  return { chunks, next: Number(res.headers.get('corral-log-next') ?? q.after ?? 0), truncated: res.headers.get('corral-log-truncated') === 'true' }
}

export interface FollowLogsOptions {
  /** Resume after this seq. */
  readonly after?: number
  readonly signal?: AbortSignal
  readonly onChunk: (chunk: AgentLogChunk) => void
}

/** Resolves when `signal` aborts; rejects with the ApiError of a refused connection. */
export async function followAgentLogs(client: CorralClient, workspaceId: string, o: FollowLogsOptions): Promise<void> {
  const { EventSource } = await import('eventsource')
  const url = client.url(`/workspaces/${encodeURIComponent(workspaceId)}/logs`, { follow: 'true' })
  let refused: ApiError | undefined
  let lastId = o.after !== undefined && o.after > 0 ? String(o.after) : undefined
  const fetchWithAuth: typeof fetch = async (input, init) => {
    const given = new Headers(init?.headers)
    const headers = client.headers({ accept: 'text/event-stream' })
    const resumeFrom = given.get('last-event-id') ?? lastId
    if (resumeFrom) headers['last-event-id'] = resumeFrom
    let response: Response
    try {
      response = await client.fetchImpl(input, { ...init, headers })
    } catch (error) {
      if ((error as Error)?.name === 'AbortError') throw error
      throw new ApiConnectionError(client.apiUrl, error)
    }
    if (response.status !== 200) refused = await apiErrorFrom(response.clone())
    return response
  }
  const source = new EventSource(url, { fetch: fetchWithAuth })
  try {
    await new Promise<void>((resolve, reject) => {
      const stop = () => {
        source.close()
        resolve()
      }
      if (o.signal?.aborted) return stop()
      o.signal?.addEventListener('abort', stop, { once: true })
      source.addEventListener('log', (message) => {
        if (o.signal?.aborted) return
        if (message.lastEventId) lastId = message.lastEventId
        try {
          o.onChunk(JSON.parse(message.data) as AgentLogChunk)
        } catch (error) {
          reject(error)
        }
      })
      source.addEventListener('error', () => {
        if (source.readyState === source.CLOSED) reject(refused ?? new Error('the log stream was closed by the server'))
      })
    })
  } finally {
    source.close()
  }
}
