// The batched audit writer: every producer's AuditSink. Events are stamped at the source (UUIDv7
// id, RFC 3339 timestamp), queued, and written in batches with insert-or-ignore on id. Nothing is
// ever dropped: a full queue makes producers wait, and a failed batch is retried with backoff
// until it commits. After a batch commits its new ids are announced on the live bus channel.
// The one exception is shutdown: close() waits at most `drainTimeoutMs` for the queue to commit;
// past that (the database is down) it gives up, names how many events were not persisted in the
// error log and rejects with AuditDrainTimeoutError, so the process exits non-zero and says so
// instead of hanging on SIGTERM. Those events are lost with the process (docs/audit.md).

import { v7 as uuidv7 } from 'uuid'
import { CorralError } from '../errors.js'
import { isUuid } from '../store/repositories/audit.js'
import type { Store } from '../store/index.js'
import {
  ACTORS, CATEGORIES, DECISIONS, DENY_REASONS, EVENT_TYPES, PHASES, POLICY_TYPES,
  type AuditEvent, type AuditSink, type NewAuditEvent,
} from './event.js'
import { publishCommitted } from './notify.js'

export interface AuditWriterOptions {
  /** Rows per insert transaction (default 500). */
  batchSize?: number
  /** How long a partial batch waits for company before it is written (default 20 ms). */
  flushIntervalMs?: number
  /** Events queued or in flight before emit() waits (default 10,000). */
  maxQueue?: number
  /** Where write failures are reported; they are retried, never dropped. */
  logger?: { error(obj: object, msg: string): void }
  /**
   * How long close() waits for queued events to commit before giving up (default 10 s: under the
   * 20 s forced exit of `corral serve` and `corral proxy`, so the count is logged before that).
   */
  drainTimeoutMs?: number
}

/** close() could not commit every event before its deadline; `pending` events were not persisted. */
export class AuditDrainTimeoutError extends Error {
  constructor(
    readonly pending: number,
    readonly drainTimeoutMs: number,
  ) {
    super(`audit: ${pending} event(s) not persisted: the database did not accept them within the ${drainTimeoutMs} ms shutdown drain deadline; they are lost when this process exits`)
    this.name = 'AuditDrainTimeoutError'
  }
}

export interface AuditWriter extends AuditSink {
  /** Resolves when every event emitted before the call is committed. */
  flush(): Promise<void>
  /**
   * Refuses further events and flushes, waiting at most drainTimeoutMs; then stops retrying,
   * logs the number of events not persisted and rejects with AuditDrainTimeoutError.
   */
  close(): Promise<void>
}

const MAX_BACKOFF_MS = 5_000

export function createAuditWriter(store: Store, opts: AuditWriterOptions = {}): AuditWriter {
  const batchSize = Math.max(1, opts.batchSize ?? 500)
  const flushIntervalMs = Math.max(0, opts.flushIntervalMs ?? 20)
  const maxQueue = Math.max(batchSize, opts.maxQueue ?? 10_000)
  const logger = opts.logger ?? { error: (obj, msg) => console.error(msg, obj) }
  const drainTimeoutMs = Math.max(0, opts.drainTimeoutMs ?? 10_000)

  const queue: AuditEvent[] = []
  let inFlight = 0
  let spaceWaiters: Array<() => void> = []
  let running: Promise<void> | undefined
  let timer: NodeJS.Timeout | undefined
  let closed = false
  // Set when close() gave up: retries stop so the process can exit.
  let abandoned: AuditDrainTimeoutError | undefined
  let wakeBackoff: (() => void) | undefined

  const releaseWaiters = () => {
    const waiters = spaceWaiters
    spaceWaiters = []
    for (const w of waiters) w()
  }

  const writeBatch = async (batch: AuditEvent[]) => {
    let backoff = 50
    for (let attempt = 1; !abandoned; attempt++) {
      try {
        const ids = await store.audit.insertBatchReturningIds(batch)
        await publishCommitted(store, batch, ids).catch((err: unknown) =>
          logger.error({ err: errorInfo(err) }, 'audit: live notification failed (events are stored; streams resume from the log)'),
        )
        return
      } catch (err) {
        logger.error({ err: errorInfo(err), attempt, events: batch.length }, 'audit: batch insert failed; retrying')
        if (abandoned) return
        await new Promise<void>((r) => {
          const t = setTimeout(r, backoff)
          wakeBackoff = () => {
            clearTimeout(t)
            r()
          }
        })
        wakeBackoff = undefined
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS)
      }
    }
  }

  // Full batches are written back to back; a partial batch waits for the flush interval (or an
  // explicit flush) so that a steady trickle still coalesces into few transactions.
  let flushRequested = false
  const run = async () => {
    while (!abandoned && (queue.length >= batchSize || (queue.length > 0 && flushRequested))) {
      const batch = queue.splice(0, batchSize)
      inFlight += batch.length
      try {
        await writeBatch(batch)
      } finally {
        inFlight -= batch.length
        releaseWaiters()
      }
    }
  }

  const kick = (): Promise<void> => {
    if (timer) {
      clearTimeout(timer)
      timer = undefined
    }
    running ??= run().finally(() => {
      running = undefined
      flushRequested = false
      if (queue.length > 0) schedule()
    })
    return running
  }

  function schedule(): void {
    if (running || abandoned) return
    if (queue.length >= batchSize) void kick()
    else if (!timer) {
      timer = setTimeout(() => {
        timer = undefined
        flushRequested = true
        void kick()
      }, flushIntervalMs)
      timer.unref()
    }
  }

  return {
    async emit(input: NewAuditEvent): Promise<AuditEvent> {
      if (closed) throw new Error('audit writer is closed')
      const event = stamp(input)
      while (queue.length + inFlight >= maxQueue) {
        await new Promise<void>((r) => spaceWaiters.push(r))
        if (closed) throw new Error('audit writer is closed')
      }
      queue.push(event)
      schedule()
      return event
    },
    async flush() {
      while (!abandoned && (queue.length > 0 || running)) {
        flushRequested = true
        await kick()
      }
      if (abandoned) throw abandoned
    },
    async close() {
      closed = true
      if (abandoned) throw abandoned
      let deadline: NodeJS.Timeout | undefined
      const drained = this.flush().then(() => true)
      const expired = new Promise<false>((r) => (deadline = setTimeout(() => r(false), drainTimeoutMs)))
      const ok = await Promise.race([drained, expired]).finally(() => clearTimeout(deadline))
      releaseWaiters()
      if (ok) return
      // The in-flight batch (if its insert ever returns) and the queue are what was not persisted.
      const pending = queue.length + inFlight
      abandoned = new AuditDrainTimeoutError(pending, drainTimeoutMs)
      drained.catch(() => {})
      wakeBackoff?.()
      logger.error({ pending, drainTimeoutMs }, abandoned.message)
      throw abandoned
    },
  }
}

// [column, allowed values, required]: checked in this order, so error details list fields stably.
const VOCABULARIES: ReadonlyArray<readonly [string, ReadonlySet<string>, boolean]> = [
  ['event_type', new Set<string>(EVENT_TYPES), true],
  ['category', new Set<string>(CATEGORIES), true],
  ['actor', new Set<string>(ACTORS), true],
  ['decision', new Set<string>(DECISIONS), false],
  ['reason', new Set<string>(DENY_REASONS), false],
  ['phase', new Set<string>(PHASES), false],
  ['policy_type', new Set<string>(POLICY_TYPES), false],
]
const INTEGER_COLUMNS = ['latency_ms', 'transforms_applied', 'validations_applied'] as const
const CANONICAL_TS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

// Many events share a millisecond at high rates: format each millisecond once.
let lastNowMs = -1
let lastNowIso = ''
function nowIso(): string {
  const ms = Date.now()
  if (ms !== lastNowMs) {
    lastNowMs = ms
    lastNowIso = new Date(ms).toISOString()
  }
  return lastNowIso
}

/**
 * Validates an event against the closed vocabularies and fills id and timestamp. (Hot path: every
 * event. Plain loops and one fresh object, no spread-then-delete: deleting keys turns V8 objects
 * into slow dictionaries, which every later read of the event paid for.)
 */
export function stamp(input: NewAuditEvent): AuditEvent {
  const src = input as unknown as Record<string, unknown>
  let fields: Record<string, string> | undefined
  const fail = (name: string, message: string) => ((fields ??= {})[name] = message)
  if (typeof input.org_id !== 'string' || input.org_id === '') fail('org_id', 'must be a non-empty string')
  if (typeof input.user_id !== 'string' || input.user_id === '') fail('user_id', 'must be a non-empty string')
  for (let i = 0; i < VOCABULARIES.length; i++) {
    const [name, allowed, required] = VOCABULARIES[i]
    const value = src[name]
    if (value === undefined || value === null) {
      if (required) fail(name, 'is required')
    } else if (!allowed.has(value as string)) fail(name, `must be one of: ${[...allowed].join(', ')}`)
  }
  if (input.id !== undefined && !isUuid(input.id)) fail('id', 'must be a UUID')
  let timestamp: string
  if (input.timestamp === undefined) timestamp = nowIso()
  else if (CANONICAL_TS.test(input.timestamp) && !Number.isNaN(Date.parse(input.timestamp))) timestamp = input.timestamp
  else {
    const ms = Date.parse(input.timestamp)
    if (Number.isNaN(ms)) {
      fail('timestamp', 'must be an RFC 3339 date-time')
      timestamp = ''
    } else timestamp = new Date(ms).toISOString()
  }
  for (const c of INTEGER_COLUMNS) {
    const v = input[c]
    if (v !== undefined && v !== null && !Number.isSafeInteger(v)) fail(c, 'must be an integer')
  }
  if (fields) {
    throw new CorralError('validation_error', `invalid audit event: ${Object.entries(fields).map(([k, v]) => `${k} ${v}`).join('; ')}`, 400, { fields })
  }
  // Optional columns are absent, never null or undefined, in stored and streamed events.
  const event: Record<string, unknown> = { id: input.id?.toLowerCase() ?? uuidv7(), timestamp }
  for (const k in src) {
    if (k === 'id' || k === 'timestamp' || !Object.hasOwn(src, k)) continue
    const v = src[k]
    if (v !== undefined && v !== null) event[k] = v
  }
  return event as unknown as AuditEvent
}

function errorInfo(err: unknown): { message: string; code?: string } {
  const e = err as { message?: string; code?: string }
  return { message: e?.message ?? String(err), ...(e?.code ? { code: e.code } : {}) }
}
