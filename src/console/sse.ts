// Live streams in the browser. EventSource cannot send an Authorization header, and the token must
// not travel in a URL, so a stream is a streaming fetch read through eventsource-parser. A dropped
// connection reconnects (bounded back-off) with `Last-Event-ID` set to the last event seen, so the
// server resumes without gaps or duplicates; a refused one (4xx) ends the stream with its envelope.
import { createParser } from 'eventsource-parser'
import type { AuditEvent } from './wire.js'
import { failureFrom, type Api, type ApiFailure, type Query } from './api.js'

export interface FollowOptions {
  readonly path: string
  readonly query?: Query
  readonly signal: AbortSignal
  /** Resume after this event id on the first connection. */
  readonly lastEventId?: string
  /**
   * Without `lastEventId`: the audit query (`/audit` or `/workspaces/{id}/audit`) whose newest event
   * anchors the stream before it connects, so a reconnect before the first event still resumes
   * without a gap. Without audit read access the stream simply starts live.
   */
  readonly anchorPath?: string
  readonly onEvent: (event: AuditEvent) => void
  readonly onState?: (state: 'live' | 'reconnecting' | 'ended', error?: ApiFailure) => void
}

const MAX_BACKOFF_MS = 10_000

/** Follows until `signal` aborts or the server refuses the stream. Never throws. */
export async function follow(api: Api, options: FollowOptions): Promise<void> {
  let lastId = options.lastEventId ?? (options.anchorPath ? await newestId(api, options.anchorPath, options.signal) : undefined)
  let backoff = 500
  while (!options.signal.aborted) {
    try {
      const headers: Record<string, string> = { accept: 'text/event-stream' }
      if (lastId) headers['last-event-id'] = lastId
      const response = await fetch(api.url(options.path, options.query), { headers: api.headers(headers), signal: options.signal })
      if (!response.ok) {
        const failure = await failureFrom(response)
        if (response.status < 500 && response.status !== 429) return options.onState?.('ended', failure)
        throw failure
      }
      options.onState?.('live')
      backoff = 500
      await read(response, (event) => {
        lastId = event.id
        options.onEvent(event)
      })
    } catch {
      if (options.signal.aborted) break
    }
    if (options.signal.aborted) break
    options.onState?.('reconnecting')
    await sleep(backoff, options.signal)
    backoff = Math.min(backoff * 2, MAX_BACKOFF_MS)
  }
  options.onState?.('ended')
}

async function newestId(api: Api, path: string, signal: AbortSignal): Promise<string | undefined> {
  try {
    return (await api.get<{ events: AuditEvent[] }>(path, { order: 'desc', limit: 1 }, signal)).events[0]?.id
  } catch {
    return undefined
  }
}

async function read(response: Response, onEvent: (event: AuditEvent) => void): Promise<void> {
  const parser = createParser({
    onEvent(message) {
      if (message.event !== undefined && message.event !== 'activity') return
      try {
        onEvent(JSON.parse(message.data) as AuditEvent)
      } catch {
        // a frame that is not JSON is skipped; the next one carries on
      }
    },
  })
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
  for (;;) {
    const { done, value } = await reader.read()
    if (done) return
    parser.feed(value)
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms)
    signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true })
  })
}
