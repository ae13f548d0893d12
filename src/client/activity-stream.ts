// Follows a live activity stream (SSE: `event: activity`, `id: <event id>`, `data: <audit event>`)
// on the `eventsource` client, which reconnects by itself and sends `Last-Event-ID` so the server
// resumes without gaps or duplicates. We give it a fetch that adds the Bearer header (and the
// starting Last-Event-ID when resuming) and keeps the error envelope of a refused connection: any
// non-200 ends the stream for good ([spec] "fail the connection"), so a revoked key stops `tail`
// with the server's own message instead of retrying forever.

import type { AuditEvent } from '../contract/index.js'
import type { CorralClient } from './client.js'
import { ApiConnectionError, type ApiError, apiErrorFrom } from './errors.js'

export interface FollowOptions {
  readonly workspaceId?: string
  /** Audit filter grammar; the server applies it before sending (and replays only matching events). */
  readonly filter?: readonly string[]
  /** Resume after this event id (sent as Last-Event-ID on the first connection). */
  readonly lastEventId?: string
  /**
   * Without `lastEventId`, anchor the stream at the newest stored event before connecting, so a
   * reconnect that happens before the first event arrives still resumes without a gap. Needs audit
   * read access; without it the stream simply starts live. Default true.
   */
  readonly anchor?: boolean
  readonly signal?: AbortSignal
  readonly onEvent: (event: AuditEvent) => void
  /** Called when the connection dropped and the client is about to reconnect. */
  readonly onReconnecting?: (lastEventId: string | undefined) => void
  readonly onOpen?: () => void
}

async function newestEventId(client: CorralClient, workspaceId: string | undefined): Promise<string | undefined> {
  try {
    const page = await client.queryAudit({ order: 'desc', limit: 1 }, { workspaceId })
    return page.events[0]?.id
  } catch (error) {
    // No audit read permission is not a reason to refuse following; anything else is reported.
    if ((error as ApiError).status === 403) return undefined
    throw error
  }
}

/**
 * Resolves when `signal` aborts; rejects with the ApiError of a refused connection (401, 403, 404…)
 * or when the data of an event is not JSON.
 */
export async function followActivity(client: CorralClient, options: FollowOptions): Promise<void> {
  const { EventSource } = await import('eventsource')
  const url = client.activityStreamUrl({ workspaceId: options.workspaceId }, options.filter)
  let refused: ApiError | undefined
  let lastId = options.lastEventId ?? (options.anchor === false ? undefined : await newestEventId(client, options.workspaceId))

  const fetchWithAuth: typeof fetch = async (input, init) => {
    const given = new Headers(init?.headers)
    const headers = client.headers({ accept: 'text/event-stream' })
    // eventsource sets Last-Event-ID itself after the first event; before that we supply the resume point.
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
      // Close at once: events already parsed from the same chunk must not be delivered after a stop.
      const stop = () => {
        source.close()
        resolve()
      }
      if (options.signal?.aborted) return stop()
      options.signal?.addEventListener('abort', stop, { once: true })
      source.addEventListener('open', () => options.onOpen?.())
      source.addEventListener('activity', (message) => {
        if (options.signal?.aborted) return
        if (message.lastEventId) lastId = message.lastEventId
        try {
          options.onEvent(JSON.parse(message.data) as AuditEvent)
        } catch (error) {
          reject(error)
        }
      })
      source.addEventListener('error', () => {
        if (source.readyState === source.CLOSED) {
          reject(refused ?? new Error('the activity stream was closed by the server'))
        } else {
          options.onReconnecting?.(lastId)
        }
      })
    })
  } finally {
    source.close()
  }
}
