// One SSE stream of the API followed on the `eventsource` client, which reconnects by itself and
// sends `Last-Event-ID` so the server resumes without gaps or duplicates. Its fetch adds the Bearer
// header (and the starting Last-Event-ID when resuming) and keeps the error envelope of a refused
// connection: any non-200 ends the stream for good ([spec] "fail the connection"), so a revoked
// key stops the follower with the server's own message instead of retrying forever. Used by the
// activity stream (activity-stream.ts) and the agent's output (workspace-logs.ts).
import type { CorralClient } from './client.js'
import { ApiConnectionError, type ApiError, apiErrorFrom } from './errors.js'

export interface SseFollow<T> {
  /** The SSE event name to deliver (`activity`, `log`). */
  readonly event: string
  /** Resume after this id (sent as Last-Event-ID on the first connection). */
  readonly lastEventId?: string
  readonly signal?: AbortSignal
  readonly onMessage: (data: T) => void
  readonly onOpen?: () => void
  /** The connection dropped and the client is about to reconnect. */
  readonly onReconnecting?: (lastEventId: string | undefined) => void
  /** The stream's name in the error when the server closed it without an envelope. */
  readonly what: string
}

/** Resolves when `signal` aborts; rejects with the ApiError of a refused connection, or when an event's data is not JSON. */
export async function followSse<T>(client: CorralClient, url: string | URL, o: SseFollow<T>): Promise<void> {
  const { EventSource } = await import('eventsource')
  let refused: ApiError | undefined
  let lastId = o.lastEventId
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
      if (o.signal?.aborted) return stop()
      o.signal?.addEventListener('abort', stop, { once: true })
      source.addEventListener('open', () => o.onOpen?.())
      source.addEventListener(o.event, (message) => {
        if (o.signal?.aborted) return
        if (message.lastEventId) lastId = message.lastEventId
        try {
          o.onMessage(JSON.parse(message.data) as T)
        } catch (error) {
          reject(error)
        }
      })
      source.addEventListener('error', () => {
        if (source.readyState === source.CLOSED) reject(refused ?? new Error(`the ${o.what} was closed by the server`))
        else o.onReconnecting?.(lastId)
      })
    })
  } finally {
    source.close()
  }
}
