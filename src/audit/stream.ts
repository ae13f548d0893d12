// The live activity stream (SSE) behind GET /v1/activity/stream and the workspace variant.
// Each event is `event: activity`, `id: <UUIDv7>`, `data: <JSON audit event>`. A reconnecting
// client sends Last-Event-ID; we replay from the log after that event and then attach to the live
// bus without a gap or a duplicate: subscribe first (buffering), replay, then drain the buffer
// skipping ids the replay already sent. A client that cannot keep up is cut (it reconnects and
// resumes) rather than buffered without bound. Route auth and permissions are the server's.

import type { IncomingMessage, ServerResponse } from 'node:http'
import { CorralError, type AuditFilterClause, type AuditEvent, matchesFilters, parseFilters, type FilterInput } from '../contract/index.js'
import { isUuid, type Store } from '../store/index.js'
import type { AuditBus } from './bus.js'

export const DEFAULT_HEARTBEAT_MS = 15_000
export const DEFAULT_MAX_DURATION_MS = 60 * 60 * 1000
/** Suggested reconnect delay sent as `retry:` when the stream opens. */
export const RETRY_MS = 2_000
/** Bytes a slow client may have pending before it is disconnected. */
export const MAX_PENDING_BYTES = 1024 * 1024
const REPLAY_PAGE = 500
/** Live events held back while a replay runs; a client that far behind is cut and resumes. */
export const MAX_BUFFERED_EVENTS = 10_000
/**
 * How long ids sent by the replay are remembered after going live. A row committed just before
 * the replay read it can still have its notification in flight (Postgres delivers NOTIFY
 * asynchronously); remembering the replayed ids for a while drops that late duplicate.
 */
const REPLAY_DEDUP_MS = 30_000

export interface StreamActivityOptions {
  store: Store
  bus: AuditBus
  orgId: string
  reply: ServerResponse
  request: IncomingMessage
  /** The Last-Event-ID header (or query parameter): resume after this event. */
  lastEventId?: string
  workspaceId?: string
  /** `:own` narrowing by user_id. */
  userId?: string
  /** Audit filter clauses (same grammar as GET /v1/audit). */
  filter?: FilterInput
  heartbeatMs?: number
  maxDurationMs?: number
  /** Extra response headers (e.g. the request id). */
  headers?: Record<string, string>
}

/**
 * Streams until the client disconnects, the maximum duration passes, or the client falls too far
 * behind. Throws (before anything is written) CorralError for a malformed Last-Event-ID or filter.
 */
export async function streamActivity(opts: StreamActivityOptions): Promise<void> {
  const filters: AuditFilterClause[] = parseFilters(opts.filter)
  const lastEventId = opts.lastEventId?.trim() || undefined
  if (lastEventId !== undefined && !isUuid(lastEventId)) {
    throw new CorralError('validation_error', 'Last-Event-ID must be the id of an audit event (a UUID)', 400, {
      fields: { 'Last-Event-ID': 'must be a UUID' },
    })
  }
  const stream = new ActivityStream(opts, filters)
  try {
    await stream.open()
    if (lastEventId !== undefined) await stream.replay(lastEventId)
    stream.goLive()
  } catch (err) {
    stream.finish(opts.reply.headersSent ? 'destroy' : 'detach')
    throw err
  }
  return stream.done
}

/** One client's stream: subscribed (buffering) from the start, replaying, then live. */
class ActivityStream {
  readonly done: Promise<void>
  #resolveDone!: () => void
  #ended = false
  #live = false
  readonly #buffer: AuditEvent[] = []
  #sent = new Set<string>()
  /**
   * On resume, the resume point is a floor: a live notification for an event at or before it is
   * one the client already had (notifications can lag behind the rows the replay reads).
   */
  #floor: { ts: number; id: string } | undefined
  readonly #unsubscribe: () => void
  #heartbeat: NodeJS.Timeout | undefined
  readonly #deadline: NodeJS.Timeout
  #forget: NodeJS.Timeout | undefined
  readonly #scope: { workspaceId?: string; userId?: string }

  constructor(
    private readonly opts: StreamActivityOptions,
    private readonly filters: AuditFilterClause[],
  ) {
    this.done = new Promise<void>((r) => (this.#resolveDone = r))
    this.#scope = { workspaceId: opts.workspaceId, userId: opts.userId }
    this.#unsubscribe = opts.bus.subscribe(
      opts.orgId,
      (e) => this.#onEvent(e),
      this.#scope,
      // Live notifications were lost (the database connection dropped): end cleanly so the client
      // reconnects with Last-Event-ID and the replay from the log fills the gap.
      () => this.finish('end'),
    )
    // The response's close (not the request's, which fires once its body is read) means the client left.
    opts.reply.on('close', () => this.finish())
    opts.reply.on('error', () => this.finish('destroy'))
    this.#deadline = setTimeout(() => this.finish(), opts.maxDurationMs ?? DEFAULT_MAX_DURATION_MS)
    this.#deadline.unref()
  }

  #onEvent(e: AuditEvent): void {
    if (this.#ended || !matchesFilters(e, this.filters)) return
    if (!this.#live) {
      this.#buffer.push(e)
      if (this.#buffer.length > MAX_BUFFERED_EVENTS) this.finish('destroy')
    } else if (!this.#sent.has(e.id) && this.#afterFloor(e)) this.#send(e)
  }

  #afterFloor(e: AuditEvent): boolean {
    if (!this.#floor) return true
    const ts = Date.parse(e.timestamp)
    return ts > this.#floor.ts || (ts === this.#floor.ts && e.id > this.#floor.id)
  }

  /**
   * end: a clean end of stream; destroy: cut the connection; detach: nothing was written yet, so
   * leave the response to the caller (it renders the error envelope).
   */
  finish(mode: 'end' | 'destroy' | 'detach' = 'end'): void {
    if (this.#ended) return
    this.#ended = true
    this.#unsubscribe()
    clearInterval(this.#heartbeat)
    clearTimeout(this.#deadline)
    clearTimeout(this.#forget)
    const { reply } = this.opts
    if (mode === 'destroy') reply.destroy()
    else if (mode === 'end' && !reply.writableEnded) reply.end()
    this.#resolveDone()
  }

  #write(chunk: string): void {
    if (this.#ended) return
    const { reply } = this.opts
    reply.write(chunk)
    // write() returning false is normal for a burst; only a client that stays behind is cut.
    if (reply.writableLength > MAX_PENDING_BYTES) this.finish('destroy')
  }

  #send(e: AuditEvent): void {
    this.#write(`event: activity\nid: ${e.id}\ndata: ${JSON.stringify(e)}\n\n`)
  }

  async open(): Promise<void> {
    const { bus, reply } = this.opts
    await bus.ready
    // Not listening (the database connection dropped): a stream opened now would miss events
    // silently. 503 + Retry-After instead; the client comes back once the bus is live again.
    if (bus.live === false) throw new CorralError('service_unavailable', 'the live feed is reconnecting to the database; retry', 503)
    reply.writeHead(200, {
      ...this.opts.headers,
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    })
    this.#write(`retry: ${RETRY_MS}\n\n`)
    reply.flushHeaders?.()
    this.#heartbeat = setInterval(() => this.#write(': heartbeat\n\n'), this.opts.heartbeatMs ?? DEFAULT_HEARTBEAT_MS)
    this.#heartbeat.unref()
  }

  /** Sends the log's events after `lastEventId`, at the client's pace. */
  async replay(lastEventId: string): Promise<void> {
    const { store, orgId, reply } = this.opts
    let after = await store.audit.positionOf(orgId, lastEventId)
    // An id we do not hold (e.g. another org's) still names a point in time: a UUIDv7 embeds it.
    after ??= { ts: uuidV7Millis(lastEventId), id: lastEventId.toLowerCase() }
    this.#floor = after
    while (!this.#ended) {
      const page = await store.audit.page(orgId, { filters: this.filters, ...this.#scope, order: 'asc', limit: REPLAY_PAGE, after })
      for (const e of page) {
        if (this.#ended) break
        this.#sent.add(e.id)
        this.#send(e)
        // The replay reads from the log at the client's pace: wait for the socket to drain.
        if (reply.writableNeedDrain) await drained(reply)
      }
      if (page.length < REPLAY_PAGE) break
      const last = page[page.length - 1]
      after = { ts: Date.parse(last.timestamp), id: last.id }
    }
  }

  /** Drains what arrived during the replay, then sends live events as they come. */
  goLive(): void {
    for (const e of this.#buffer.splice(0)) if (!this.#sent.has(e.id) && this.#afterFloor(e)) this.#send(e)
    this.#live = true
    if (this.#sent.size > 0) {
      this.#forget = setTimeout(() => (this.#sent = new Set()), REPLAY_DEDUP_MS)
      this.#forget.unref()
    }
  }
}

function drained(reply: ServerResponse): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      reply.off('drain', done)
      reply.off('close', done)
      resolve()
    }
    reply.on('drain', done)
    reply.on('close', done)
  })
}

/** The Unix-epoch milliseconds in the first 48 bits of a UUIDv7 (0 for other versions). */
export function uuidV7Millis(id: string): number {
  const hex = id.replaceAll('-', '')
  return hex[12] === '7' ? parseInt(hex.slice(0, 12), 16) : 0
}
