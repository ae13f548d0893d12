// The agent's own output of a workspace (GET /v1/workspaces/{id}/logs): a page as NDJSON chunks,
// or followed live over SSE (`event: log`, `id: <seq>`) through followSse (sse.ts: reconnects,
// resumes with Last-Event-ID; a refused connection (401, 403, 404) ends it with the server's envelope).
import type { CorralClient } from './client.js'
import { ApiConnectionError, apiErrorFrom } from './errors.js'
import { followSse } from './sse.js'

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
  const url = client.url(`/workspaces/${encodeURIComponent(workspaceId)}/logs`, { follow: 'true' })
  await followSse<AgentLogChunk>(client, url, {
    event: 'log',
    what: 'log stream',
    lastEventId: o.after !== undefined && o.after > 0 ? String(o.after) : undefined,
    signal: o.signal,
    onMessage: o.onChunk,
  })
}
