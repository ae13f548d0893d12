// The audit writer: every producer's AuditSink. It never throws into a request path and never
// stops (docs/reliability.md "The audit writer never stops"):
// - emit() encodes the event once (src/audit/encode.ts); an event that breaks the contract is a bug
//   of its producer: logged at error level once per kind, counted, and quarantined, not thrown.
// - emit() resolves when the event is durable: on disk in the journal (openAuditWriter with a
//   journal directory; group-committed, src/audit/journal.ts) or, without a journal, committed to
//   the database. It rejects only with AuditUnavailableError: at once when `maxQueue` events are
//   not yet in the database, or after close().
// - Batches go to the database with insert-or-ignore on id, one at a time (group commit: events
//   that arrive while one batch is written form the next). A batch the database refuses is split
//   until the refused event is alone; that event is quarantined and every other row is written.
//   Transient failures (database away, busy, full) are retried with backoff (src/audit/classify.ts).
// - After each commit the new ids are announced on the live bus channel.
// - close() flushes within `drainTimeoutMs`. With a journal, what the database did not take stays
//   in the journal and is replayed at the next start; without one, it rejects with
//   AuditDrainTimeoutError naming how many events were lost.

import { AsyncLocalStorage } from 'node:async_hooks'
import { CorralError } from '../errors.js'
import type { Store } from '../store/index.js'
import { classifyFailure, describeFailure } from './classify.js'
import { check, describeFields, encodeEvent, quarantineRecord, type QuarantineRecord } from './encode.js'
import type { AuditEvent, AuditSink, NewAuditEvent } from './event.js'
import { Journal, type RecoveredSegment, type Segment } from './journal.js'
import { publishCommitted } from './notify.js'
import { AuditUnavailableError } from './unavailable.js'

export interface AuditWriterLogger {
  error(obj: object, msg: string): void
  warn?(obj: object, msg: string): void
}

export interface AuditWriterOptions {
  /** Rows per insert transaction (default 500). */
  batchSize?: number
  /** Accepted for compatibility; batches are written as soon as the previous one commits. */
  flushIntervalMs?: number
  /** Events emitted but not yet in the database before emit() refuses (default 20,000). */
  maxQueue?: number
  /** The same bound in serialized size (default 256 Mi UTF-16 units), so large events cannot exhaust memory. */
  maxQueueBytes?: number
  logger?: AuditWriterLogger
  /** How long close() waits for the database (default 10 s, under serve's 20 s forced exit). */
  drainTimeoutMs?: number
  /** With openAuditWriter: the journal root (serve uses `<data-dir>/audit-journal`). */
  journalDir?: string
  /** Journal segment size before rotation (default 8 MiB). */
  journalSegmentBytes?: number
  /**
   * How long emit() waits for durability before it rejects with AuditUnavailableError (default
   * 5 s; only reached when the database is away and there is no working journal). The event
   * stays queued and is written when the database is back.
   */
  durableTimeoutMs?: number
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

/** Counters an operator reads (GET /healthz `audit`, docs/audit.md). */
export interface AuditWriterStats {
  /** Events accepted by emit(). */
  emitted: number
  /** Rows newly inserted into audit_events. */
  written: number
  /** Events kept in audit_quarantine instead (invalid, too large, refused by the database). */
  quarantined: number
  /** Of those, events that broke the contract (a producer bug). */
  invalid: number
  /** Events whose strings had NUL or lone surrogates replaced by U+FFFD. */
  sanitized: number
  /** emit() calls refused with AuditUnavailableError. */
  rejected: number
  /** Failed database attempts retried (transient failures). */
  retries: number
  /** Events accepted and not yet in the database. */
  pending: number
  /** Their size as serialized text (UTF-16 units). */
  pendingBytes: number
  /** Events replayed from the journal at start. */
  replayed: number
  journal?: { segments: number; bytes: number }
  /** The last database failure, while the writer is retrying. */
  failing?: string
}

export interface AuditWriter extends AuditSink {
  /** Resolves when every event emitted before the call is in the database (or quarantined). */
  flush(): Promise<void>
  /** Refuses further events, flushes within drainTimeoutMs (see the file comment). */
  close(): Promise<void>
  stats(): AuditWriterStats
}

interface Item {
  seq: number
  event: AuditEvent
  row?: unknown[]
  q?: QuarantineRecord
  line?: string
  seg?: Segment
  recovered?: RecoveredGroup
  resolve?: (e: AuditEvent) => void
  reject?: (err: Error) => void
  /** Date.now() at emit, for the durability deadline. */
  at?: number
  /** Serialized size counted in stats.pendingBytes. */
  size: number
}

interface RecoveredGroup {
  segment: RecoveredSegment
  left: number
}

const MAX_BACKOFF_MS = 5_000
const noop = () => {}

// Events emitted while handling one API request, so the response can wait for their durability
// even when a route did not await emit() (src/server/app.ts, onSend).
const requestScope = new AsyncLocalStorage<Set<Promise<unknown>>>()

/** Runs `fn` with a fresh set collecting the durability promises of every emit() inside it. */
export function collectAuditEmits<T>(pending: Set<Promise<unknown>>, fn: () => T): T {
  return requestScope.run(pending, fn)
}

/** A writer without a journal: emit() resolves once the event is committed to the database. */
export function createAuditWriter(store: Store, opts: AuditWriterOptions = {}): AuditWriter {
  return buildWriter(store, opts, undefined)
}

/**
 * A writer with a journal under `opts.journalDir`: emit() resolves once the event is on disk.
 * Segments left by a previous life are replayed into the database first (insert-or-ignore on id),
 * waiting at most drainTimeoutMs before the rest continues in the background.
 */
export async function openAuditWriter(store: Store, opts: AuditWriterOptions & { journalDir: string }): Promise<AuditWriter> {
  const { journal, recovered } = await Journal.open(opts.journalDir, { segmentBytes: opts.journalSegmentBytes })
  const writer = buildWriter(store, opts, journal)
  await writer.replay(recovered)
  return writer
}

function buildWriter(store: Store, opts: AuditWriterOptions, journal: Journal | undefined): AuditWriter & { replay(r: RecoveredSegment[]): Promise<void> } {
  const batchSize = Math.max(1, opts.batchSize ?? 500)
  const maxQueue = Math.max(1, opts.maxQueue ?? 20_000)
  const maxQueueBytes = Math.max(1, opts.maxQueueBytes ?? 256 << 20)
  const logger = opts.logger ?? { error: (obj: object, msg: string) => console.error(msg, obj) }
  const drainTimeoutMs = Math.max(0, opts.drainTimeoutMs ?? 10_000)
  const durableTimeoutMs = Math.max(1, opts.durableTimeoutMs ?? 5_000)
  const stats: AuditWriterStats = { emitted: 0, written: 0, quarantined: 0, invalid: 0, sanitized: 0, rejected: 0, retries: 0, pending: 0, pendingBytes: 0, replayed: 0 }
  const loggedKinds = new Set<string>()
  const discarding = new Set<Promise<void>>()
  // Postgres takes a batch as its lines joined (one JSON parameter): keep them until the commit.
  const keepLines = store.dialect === 'postgres'

  const queue: Item[] = []
  let seq = 0
  let doneSeq = 0
  let flushWaiters: Array<{ target: number; resolve: () => void }> = []
  let pumping: Promise<void> | undefined
  let closed = false
  // Set when close() gave up: retries stop so the process can exit.
  let stopped = false
  let abandoned: AuditDrainTimeoutError | undefined
  let wakeBackoff: (() => void) | undefined

  const prepare = (input: NewAuditEvent): Item => {
    const r = encodeEvent(input)
    if (r.ok) {
      if (r.value.sanitized) stats.sanitized++
      return { seq: ++seq, event: r.value.event, row: r.value.row, line: r.value.line, size: r.value.line.length }
    }
    if (r.kind === 'invalid_event') {
      stats.invalid++
      const fields = r.fields ?? {}
      const type = typeof r.event.event_type === 'string' ? r.event.event_type.slice(0, 64) : typeof r.event.event_type
      const kind = `${type}:${Object.keys(fields).sort().join(',')}`
      if (!loggedKinds.has(kind) && loggedKinds.size < 1000) {
        loggedKinds.add(kind)
        logger.error({ event_type: type, fields }, `audit: BUG: a producer emitted an invalid event (${describeFields(fields)}); it is quarantined, not written (logged once per kind)`)
      }
    } else logger.error({ id: r.event.id, reason: r.reason }, 'audit: event cannot be stored as a row; quarantined')
    const q = quarantineRecord(input, r.event, r.reason)
    const line = quarantineLine(q)
    return { seq: ++seq, event: r.event, q, line, size: line.length }
  }

  const finish = (it: Item) => {
    stats.pending--
    stats.pendingBytes -= it.size
    if (it.seg) journal?.release(it.seg)
    if (it.recovered && --it.recovered.left === 0 && journal) {
      const p = journal.discard(it.recovered.segment).finally(() => discarding.delete(p))
      discarding.add(p)
    }
    const resolve = it.resolve
    it.resolve = it.reject = undefined
    resolve?.(it.event)
  }

  const pause = (ms: number) =>
    new Promise<void>((r) => {
      const t = setTimeout(r, ms)
      wakeBackoff = () => {
        clearTimeout(t)
        r()
      }
    }).finally(() => (wakeBackoff = undefined))

  /** Runs `op` until it succeeds or fails with a data error (returned); transient errors back off. */
  const attempt = async (op: () => Promise<void>, what: string, events: number): Promise<unknown> => {
    let backoff = 50
    for (let n = 1; !stopped; n++) {
      try {
        await op()
        stats.failing = undefined
        return undefined
      } catch (err) {
        if (classifyFailure(err) === 'data') return err ?? new Error('unknown failure')
        stats.retries++
        stats.failing = describeFailure(err)
        logger.error({ err: errorInfo(err), attempt: n, events }, `audit: ${what} failed (database unavailable); retrying`)
        await pause(backoff)
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS)
      }
    }
    return undefined
  }

  const quarantine = async (records: QuarantineRecord[]) => {
    // The quarantine is plain text: a failure here is the database's, so it is retried, never split.
    let backoff = 50
    for (let n = 1; !stopped; n++) {
      try {
        await store.audit.quarantine(records)
        stats.quarantined += records.length
        return
      } catch (err) {
        stats.retries++
        stats.failing = describeFailure(err)
        logger.error({ err: errorInfo(err), attempt: n, events: records.length }, 'audit: quarantine insert failed; retrying')
        await pause(backoff)
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS)
      }
    }
  }

  /** Writes rows; a refused batch is bisected until the refused event is alone, then quarantined. */
  const writeRows = async (items: Item[]): Promise<void> => {
    let ids: string[] = []
    const err = await attempt(async () => {
      const lines = keepLines && items.every((i) => i.line !== undefined) ? items.map((i) => i.line!) : undefined
      ids = await store.audit.insertEncodedReturningIds(items.map((i) => i.row!), lines)
    }, 'batch insert', items.length)
    if (stopped) return
    if (err === undefined) {
      stats.written += ids.length
      await publishCommitted(store, items.map((i) => i.event), ids).catch((e: unknown) =>
        logger.error({ err: errorInfo(e) }, 'audit: live notification failed (events are stored; streams resume from the log)'),
      )
      return
    }
    if (items.length === 1) {
      const reason = `database_refused: ${describeFailure(err)}`
      logger.error({ id: items[0].event.id, reason }, 'audit: the database refused one event; quarantined, the rest of its batch is written')
      await quarantine([quarantineRecord(items[0].event, items[0].event, reason)])
      return
    }
    const mid = items.length >>> 1
    await writeRows(items.slice(0, mid))
    await writeRows(items.slice(mid))
  }

  const pump = async () => {
    let backoff = 50
    while (queue.length > 0 && !stopped) {
      const batch = queue.splice(0, batchSize)
      try {
        const quarantined = batch.filter((i) => i.q)
        if (quarantined.length > 0) await quarantine(quarantined.map((i) => i.q!))
        const rows = batch.filter((i) => i.row)
        if (rows.length > 0) await writeRows(rows)
      } catch (err) {
        // Unreachable by design; if it happens, the batch is kept and tried again (inserts are idempotent).
        logger.error({ err: errorInfo(err) }, 'audit: BUG: writing a batch failed unexpectedly; retrying')
        queue.unshift(...batch)
        await pause(backoff)
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS)
        continue
      }
      backoff = 50
      if (stopped) {
        queue.unshift(...batch)
        return
      }
      for (const it of batch) finish(it)
      doneSeq = Math.max(doneSeq, batch[batch.length - 1].seq)
      const ready = flushWaiters.filter((w) => w.target <= doneSeq)
      flushWaiters = flushWaiters.filter((w) => w.target > doneSeq)
      for (const w of ready) w.resolve()
    }
  }

  const kick = () => {
    pumping ??= pump()
      .catch((err: unknown) => logger.error({ err: errorInfo(err) }, 'audit: writer loop failed'))
      .finally(() => {
        pumping = undefined
        if (queue.length > 0 && !stopped) kick()
      })
  }
  const enqueue = (it: Item) => {
    queue.push(it)
    kick()
  }

  let journalBroken = false
  // Callers waiting for durability, oldest first; a sweep refuses those past the deadline (the
  // database is away and the journal cannot help), so no caller hangs. Their events stay queued.
  let waiting: Item[] = []
  let sweeper: NodeJS.Timeout | undefined
  const sweep = () => {
    const now = Date.now()
    let i = 0
    for (; i < waiting.length; i++) {
      const it = waiting[i]
      if (!it.resolve) continue
      if (now - it.at! < durableTimeoutMs) break
      const reject = it.reject!
      it.resolve = it.reject = undefined
      stats.rejected++
      reject(new AuditUnavailableError('timeout', 5, `the audit log could not make the event durable within ${durableTimeoutMs} ms (the database is unavailable); it is kept and written when the database is back`))
    }
    waiting = waiting.slice(i).filter((it) => it.resolve)
    if (waiting.length === 0) {
      clearInterval(sweeper)
      sweeper = undefined
    }
  }
  const watch = (it: Item) => {
    it.at = Date.now()
    waiting.push(it)
    if (!sweeper) {
      sweeper = setInterval(sweep, Math.min(250, durableTimeoutMs))
      sweeper.unref()
    }
  }

  const emitItem = (it: Item): Promise<AuditEvent> => {
    stats.pending++
    stats.pendingBytes += it.size
    const done = new Promise<AuditEvent>((resolve, reject) => {
      it.resolve = resolve
      it.reject = reject
      watch(it)
      if (!journal) return enqueue(it)
      journal.append(it.line!).then(
        (seg) => {
          it.seg = seg
          if (!keepLines) it.line = undefined
          if (journalBroken) {
            journalBroken = false
            logger.error({ dir: journal.dir }, 'audit: journal writable again')
          }
          const r = it.resolve
          it.resolve = it.reject = undefined
          r?.(it.event)
          enqueue(it)
        },
        (err: unknown) => {
          // The journal cannot write (disk full, I/O error): the event is durable once the database has it.
          if (!keepLines) it.line = undefined
          if (!journalBroken) {
            journalBroken = true
            logger.error({ err: errorInfo(err), dir: journal.dir }, 'audit: journal write failed; events are acknowledged after the database commit until it recovers')
          }
          enqueue(it)
        },
      )
    })
    return done
  }

  const writer = {
    emit(input: NewAuditEvent): Promise<AuditEvent> {
      let p: Promise<AuditEvent>
      if (closed) p = Promise.reject(new AuditUnavailableError('closed', 5, 'audit writer is closed (the server is shutting down); retry'))
      else if (stats.pending >= maxQueue || stats.pendingBytes >= maxQueueBytes) {
        stats.rejected++
        p = Promise.reject(new AuditUnavailableError('queue_full', 1, `the audit log is not keeping up (${stats.pending} events not yet stored); retry shortly`))
      } else {
        stats.emitted++
        try {
          p = emitItem(prepare(input))
        } catch (err) {
          // Unreachable by design (prepare never throws); if it ever does, refuse instead of throwing.
          logger.error({ err: errorInfo(err) }, 'audit: BUG: emit failed unexpectedly')
          p = Promise.reject(new AuditUnavailableError('queue_full', 1, 'the audit log could not take the event; retry'))
        }
      }
      // A caller that forgot to await must not crash the process with an unhandled rejection.
      p.catch(noop)
      requestScope.getStore()?.add(p)
      return p
    },
    flush(): Promise<void> {
      if (abandoned) return Promise.reject(abandoned)
      const target = seq
      if (doneSeq >= target && queue.length === 0 && stats.pending === 0) return Promise.resolve()
      return new Promise<void>((resolve) => flushWaiters.push({ target, resolve })).then(() => {
        if (abandoned) throw abandoned
      })
    },
    async close(): Promise<void> {
      closed = true
      if (abandoned) throw abandoned
      let deadline: NodeJS.Timeout | undefined
      const drained = writer.flush().then(() => true)
      const expired = new Promise<false>((r) => (deadline = setTimeout(() => r(false), drainTimeoutMs)))
      const ok = await Promise.race([drained, expired]).finally(() => clearTimeout(deadline))
      drained.catch(noop)
      if (!ok) {
        stopped = true
        wakeBackoff?.()
      }
      const pending = stats.pending
      await Promise.all(discarding)
      if (journal) {
        const { kept } = await journal.close()
        if (!ok) logger.error({ pending, kept, dir: journal.dir, drainTimeoutMs }, `audit: ${pending} event(s) not yet in the database after ${drainTimeoutMs} ms; kept in the journal and replayed at the next start`)
        return
      }
      if (ok) return
      abandoned = new AuditDrainTimeoutError(pending, drainTimeoutMs)
      for (const w of flushWaiters) w.resolve()
      flushWaiters = []
      logger.error({ pending, drainTimeoutMs }, abandoned.message)
      throw abandoned
    },
    stats(): AuditWriterStats {
      return { ...stats, ...(journal ? { journal: journal.stats() } : {}) }
    },
    async replay(segments: RecoveredSegment[]): Promise<void> {
      let torn = 0
      for (const segment of segments) {
        if (segment.tornTail) torn++
        const group: RecoveredGroup = { segment, left: segment.lines.length }
        if (group.left === 0) {
          await journal?.discard(segment)
          continue
        }
        for (const line of segment.lines) {
          const it = prepareReplay(line)
          it.recovered = group
          stats.pending++
          stats.pendingBytes += it.size
          stats.replayed++
          enqueue(it)
        }
      }
      if (torn > 0) logger.warn?.({ torn }, 'audit: journal replay skipped the unfinished last write of a crashed writer (never acknowledged)')
      if (stats.replayed === 0) return
      let deadline: NodeJS.Timeout | undefined
      await Promise.race([writer.flush(), new Promise<void>((r) => (deadline = setTimeout(r, drainTimeoutMs)))]).finally(() => clearTimeout(deadline))
    },
  }

  const prepareReplay = (line: string): Item => {
    let parsed: unknown
    try {
      parsed = JSON.parse(line)
    } catch {
      const q = quarantineRecord(line, undefined, 'journal_corrupt: a journal line is not JSON')
      return { seq: ++seq, event: { id: q.id } as AuditEvent, q, size: line.length }
    }
    const rec = parsed as { _quarantine?: QuarantineRecord }
    if (rec._quarantine) return { seq: ++seq, event: { id: rec._quarantine.id } as AuditEvent, q: rec._quarantine, size: line.length }
    delete (parsed as { ts?: unknown }).ts
    const it = prepare(parsed as NewAuditEvent)
    if (!keepLines) it.line = undefined
    return it
  }

  return writer
}

function quarantineLine(q: QuarantineRecord): string {
  return JSON.stringify({ _quarantine: q })
}

/** Validates an event and fills id and timestamp; throws CorralError validation_error (for edges that want a 400). */
export function stamp(input: NewAuditEvent): AuditEvent {
  const { event, fields } = check(input)
  if (fields) throw new CorralError('validation_error', `invalid audit event: ${describeFields(fields)}`, 400, { fields })
  return event
}

function errorInfo(err: unknown): { message: string; code?: string } {
  const e = err as { message?: string; code?: string }
  return { message: e?.message ?? String(err), ...(e?.code ? { code: e.code } : {}) }
}
