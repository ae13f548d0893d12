// The audit writer: every producer's AuditSink. It never throws into a request path and never
// stops (docs/reliability.md "The audit writer never stops"):
// - emit() encodes the event once (src/audit/encode.ts); an event that breaks the contract is a bug
//   of its producer: logged at error level once per kind, counted, and quarantined, not thrown.
// - emit() resolves when the event is durable: on disk in the journal (openAuditWriter with a
//   journal directory; group-committed, src/audit/group-commit.ts) or, without a journal, committed to
//   the database. It rejects only with AuditUnavailableError: at once when `maxQueue` events are
//   not yet in the database, or after close().
// - Batches go to the database with insert-or-ignore on id, one at a time (group commit: events
//   that arrive while one batch is written form the next; with a journal a small batch first waits
//   up to dbLingerMs or until it holds batchSize rows, since per-commit costs dominate small batches). A batch the
//   database refuses is split
//   until the refused event is alone; that event is quarantined and every other row is written.
//   Transient failures (database away, busy, full) are retried with backoff (src/audit/classify.ts).
// - After each commit the new ids are announced on the live bus channel.
// - close() flushes within `drainTimeoutMs`. With a journal, what the database did not take stays
//   in the journal and is replayed at the next start; without one, it rejects with
//   AuditDrainTimeoutError naming how many events were lost.

import { AsyncLocalStorage } from 'node:async_hooks'
import { CorralError, type AuditEvent, type NewAuditEvent } from '../contract/index.js'
import type { Store } from '../store/index.js'
import { DbStage, errorInfo } from './db-stage.js'
import { Deadlines } from './deadlines.js'
import { check, describeFields, encodeEvent, quarantineRecord, type QuarantineRecord } from './encode.js'
import { GroupCommit } from './group-commit.js'
import { Journal, type RecoveredSegment, type Segment } from './journal.js'
import { AuditUnavailableError } from './unavailable.js'
import { AuditDrainTimeoutError, type AuditWriter, type AuditWriterLogger, type AuditWriterOptions, type AuditWriterStats } from './writer-types.js'

export {
  AuditDrainTimeoutError, type AuditWriter, type AuditWriterLogger, type AuditWriterOptions, type AuditWriterStats,
} from './writer-types.js'

interface Item {
  seq: number
  event: AuditEvent
  q?: QuarantineRecord
  line?: string
  seg?: Segment
  recovered?: RecoveredGroup
  resolve?: (e: AuditEvent) => void
  reject?: (err: Error) => void
  /** emit()'s promise, marked handled before it is rejected (a caller may not await it). */
  done?: Promise<AuditEvent>
  /** Date.now() at emit, for the durability deadline. */
  at?: number
  /** Serialized size counted in stats.pendingBytes. */
  size: number
}

interface RecoveredGroup {
  segment: RecoveredSegment
  left: number
}

const noop = () => {}
// Rows per database transaction at most. Large, because each commit rewrites the partly filled last
// page of the table and of each index: fewer commits per row at saturation. Smaller batches only
// come from a lower rate, not from this bound.
const BATCH_SIZE = 2_000
/** How long a row may wait for its database batch to fill, with a journal (dbLingerMs). */
const DB_LINGER_MS = 100
/** What an item's event becomes once it is stored and its caller answered (finish()). */
const RELEASED = Object.freeze({}) as AuditEvent

// A caller that forgot to await must not crash the process with an unhandled rejection: every
// promise emit() rejects is marked handled first (here, or in the sweep), not every one it returns.
function refuse(err: Error): Promise<never> {
  const p = Promise.reject(err)
  p.catch(noop)
  return p
}

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
  const { journal, recovered } = await Journal.open(opts.journalDir, { segmentBytes: opts.journalSegmentBytes, durability: opts.journalDurability, syncIntervalMs: opts.journalSyncIntervalMs, reserveBytes: opts.journalReserveBytes })
  const writer = buildWriter(store, opts, journal)
  await writer.replay(recovered)
  return writer
}

// long-function: the writer is one closure over its counters, queues and stages (shared by every
// step); each step inside is a short named function, and the stages live in their own files
// (group-commit.ts, db-stage.ts, deadlines.ts, journal.ts).
function buildWriter(store: Store, opts: AuditWriterOptions, journal: Journal | undefined): AuditWriter & { replay(r: RecoveredSegment[]): Promise<void> } {
  const batchSize = Math.max(1, opts.batchSize ?? BATCH_SIZE)
  const maxQueue = Math.max(1, opts.maxQueue ?? 20_000)
  const maxQueueBytes = Math.max(1, opts.maxQueueBytes ?? 256 << 20)
  const logger = opts.logger ?? { error: (obj: object, msg: string) => console.error(msg, obj) }
  const drainTimeoutMs = Math.max(0, opts.drainTimeoutMs ?? 10_000)
  const durableTimeoutMs = Math.max(1, opts.durableTimeoutMs ?? 5_000)
  const stats: AuditWriterStats = { emitted: 0, written: 0, quarantined: 0, invalid: 0, sanitized: 0, rejected: 0, retries: 0, pending: 0, pendingBytes: 0, replayed: 0 }
  const loggedKinds = new Set<string>()
  const discarding = new Set<Promise<void>>()

  let seq = 0
  let doneSeq = 0
  /** performance.now() of the last database commit. */
  let committedAt = -Infinity
  let flushWaiters: Array<{ target: number; resolve: () => void }> = []
  let closed = false
  let abandoned: AuditDrainTimeoutError | undefined

  const prepare = (input: NewAuditEvent): Item => prepareItem(input, ++seq, stats, logger, loggedKinds)

  const finish = (it: Item) => {
    stats.pending--
    stats.pendingBytes -= it.size
    if (it.recovered && --it.recovered.left === 0 && journal) {
      const p = journal.discard(it.recovered.segment).finally(() => discarding.delete(p))
      discarding.add(p)
    }
    const resolve = it.resolve
    if (resolve) {
      it.resolve = it.reject = undefined
      resolve(it.event)
    }
    // The deadline list keeps the item for up to a sweep (250 ms): let go of what is heavy now, so
    // a stored event dies young instead of being promoted to the old generation (at thousands of
    // events per second that promotion drove a mark-compact every second or so).
    it.event = RELEASED
    it.line = it.q = it.done = undefined
  }

  const batchDone = (batch: Item[]) => {
    // Journal lines released per segment run, not per event.
    let seg: Segment | undefined
    let n = 0
    for (const it of batch) {
      finish(it)
      if (it.seg === seg) n++
      else {
        if (seg) journal?.release(seg, n)
        seg = it.seg
        n = 1
      }
    }
    if (seg) journal?.release(seg, n)
    committedAt = performance.now()
    doneSeq = Math.max(doneSeq, batch[batch.length - 1].seq)
    if (flushWaiters.length === 0) return
    const ready = flushWaiters.filter((w) => w.target <= doneSeq)
    flushWaiters = flushWaiters.filter((w) => w.target > doneSeq)
    for (const w of ready) w.resolve()
  }
  // With a journal the database is off the answer's path: a batch waits up to dbLingerMs to fill
  // (or until it is full), so a moderate rate costs a few commits per second, not one per journal
  // group; each commit rewrites the partly filled last page of the table and of every index, so
  // rows per commit, not rows, set most of the database's cost at a moderate rate. The bound is what
  // a row may lag on the live stream and in queries (docs/audit.md "Live").
  const lingerMs = journal ? Math.max(0, opts.dbLingerMs ?? DB_LINGER_MS) : 0
  const stage = new DbStage<Item>({ store, batchSize, logger, stats, lingerMs, urgent: () => flushWaiters.length > 0 || closed, done: batchDone })

  let journalBroken = false
  const deadlines = new Deadlines<Item>(durableTimeoutMs, (it) => {
    const reject = it.reject!
    it.resolve = it.reject = undefined
    stats.rejected++
    it.done?.catch(noop)
    reject(new AuditUnavailableError('timeout', 5, `the audit log could not make the event durable within ${durableTimeoutMs} ms (the database is unavailable); it is kept and written when the database is back`))
  })

  const journaled = (group: Item[], seg: Segment) => {
    if (journalBroken) {
      journalBroken = false
      logger.error({ dir: journal!.dir }, 'audit: journal writable again')
    }
    for (const it of group) {
      it.seg = seg
      const r = it.resolve
      if (r) {
        it.resolve = it.reject = it.done = undefined
        r(it.event)
      }
      // From here the database stage needs the line, and the id and org to announce the row: the
      // event object (its nested values too) is let go while young, where kept until the commit
      // it was promoted to the old generation with every queued event.
      if (!it.q) it.event = { id: it.event.id, org_id: it.event.org_id } as AuditEvent
    }
    stage.enqueueAll(group)
  }
  const journalFailed = (group: Item[], err: unknown) => {
    // The journal cannot write (disk full, I/O error): the events are durable once the database has them.
    if (!journalBroken) {
      journalBroken = true
      logger.error({ err: errorInfo(err), dir: journal!.dir }, 'audit: journal write failed; events are acknowledged after the database commit until it recovers')
    }
    stage.enqueueAll(group)
  }

  const groups = journal && new GroupCommit<Item>(journal, { written: journaled, failed: journalFailed }, { intervalMs: opts.journalIntervalMs ?? (journal.durability === 'process' ? 0 : 1) })

  const emitItem = (it: Item): Promise<AuditEvent> => {
    stats.pending++
    stats.pendingBytes += it.size
    const done = new Promise<AuditEvent>((resolve, reject) => {
      it.resolve = resolve
      it.reject = reject
    })
    it.done = done
    deadlines.watch(it)
    if (groups) groups.add(it)
    else stage.enqueue(it)
    return done
  }

  /** Why an event emitted now would be refused, if it would. */
  const refusal = (): AuditUnavailableError | undefined => {
    if (closed) return new AuditUnavailableError('closed', 5, 'audit writer is closed (the server is shutting down); retry')
    if (stats.pending >= maxQueue || stats.pendingBytes >= maxQueueBytes) {
      return new AuditUnavailableError('queue_full', 1, `the audit log is not keeping up (${stats.pending} events not yet stored); retry shortly`)
    }
    return undefined
  }

  const writer = {
    admit(): void {
      const err = refusal()
      if (!err) return
      if (!closed) stats.rejected++
      throw err
    },
    emit(input: NewAuditEvent): Promise<AuditEvent> {
      let p: Promise<AuditEvent>
      const refused = refusal()
      if (refused) {
        if (!closed) stats.rejected++
        p = refuse(refused)
      } else {
        stats.emitted++
        try {
          p = emitItem(prepare(input))
        } catch (err) {
          // Unreachable by design (prepare never throws); if it ever does, refuse instead of throwing.
          logger.error({ err: errorInfo(err) }, 'audit: BUG: emit failed unexpectedly')
          p = refuse(new AuditUnavailableError('queue_full', 1, 'the audit log could not take the event; retry'))
        }
      }
      requestScope.getStore()?.add(p)
      return p
    },
    flush(): Promise<void> {
      if (abandoned) return Promise.reject(abandoned)
      const target = seq
      if (doneSeq >= target && stage.length === 0 && stats.pending === 0) return Promise.resolve()
      const waited = new Promise<void>((resolve) => flushWaiters.push({ target, resolve }))
      stage.hurry()
      return waited.then(() => {
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
        stage.stop()
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
    writable(): boolean {
      if (closed) return false
      if (!journal) return stats.failing === undefined
      if (journal.healthy) return true
      // Without a working journal a row is durable once the database has it: only while the
      // database takes rows, proven by a commit since the journal failed.
      return stats.failing === undefined && committedAt > journal.degradedSince
    },
    backlogged(): boolean {
      return stats.pending >= batchSize
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
          stage.enqueue(it)
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
    return prepare(parsed as NewAuditEvent)
  }

  return writer
}

/** Encodes an event for the queue; one that cannot be a row becomes a quarantine record (logged). */
function prepareItem(input: NewAuditEvent, seq: number, stats: AuditWriterStats, logger: AuditWriterLogger, loggedKinds: Set<string>): Item {
  const r = encodeEvent(input)
  if (r.ok) {
    if (r.value.sanitized) stats.sanitized++
    return { seq, event: r.value.event, line: r.value.line, size: r.value.line.length }
  }
  if (r.kind === 'invalid_event') {
    stats.invalid++
    const fields = r.fields ?? {}
    const type = typeof r.event.event_type === 'string' ? r.event.event_type.slice(0, 64) : typeof r.event.event_type
    const kind = `${type}:${Object.keys(fields).sort().join(',')}`
    // Logged once per kind (bounded), so a producer bug at request rate cannot flood the log.
    if (!loggedKinds.has(kind) && loggedKinds.size < 1000) {
      loggedKinds.add(kind)
      logger.error({ event_type: type, fields }, `audit: BUG: a producer emitted an invalid event (${describeFields(fields)}); it is quarantined, not written (logged once per kind)`)
    }
  } else logger.error({ id: r.event.id, reason: r.reason }, 'audit: event cannot be stored as a row; quarantined')
  const q = quarantineRecord(input, r.event, r.reason)
  const line = quarantineLine(q)
  return { seq, event: r.event, q, line, size: line.length }
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
