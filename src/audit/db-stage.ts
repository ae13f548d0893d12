// The audit writer's database stage: events that are accepted (and journaled) go to the database
// in bounded batches, one batch at a time (group commit: what arrives while one batch is written
// forms the next). A batch the database refuses with a data error is split in halves until the
// refused event is alone; that event is quarantined and every other row is written. Transient
// failures are retried with exponential backoff (src/audit/classify.ts). New ids are announced on
// the live bus after each commit.

import type { Store } from '../store/index.js'
import { classifyFailure, describeFailure } from './classify.js'
import { quarantineRecord, type QuarantineRecord } from './encode.js'
import type { AuditEvent } from '../contract/index.js'
import { publishCommitted } from './notify.js'
import type { AuditWriterLogger, AuditWriterStats } from './writer-types.js'

/** What the stage needs of an item: its line to insert (a JSON object of its columns), or a record to quarantine. */
export interface StageItem {
  /** The event, or past the journal only its id and org (the line holds the rest). */
  event: AuditEvent
  q?: QuarantineRecord
  /** The journal line, inserted as it is: both dialects take a batch's lines as one JSON array. */
  line?: string
}

export interface DbStageOptions<T extends StageItem> {
  store: Store
  batchSize: number
  logger: AuditWriterLogger
  /** Updated in place: written, quarantined, retries, failing. */
  stats: AuditWriterStats
  /**
   * How long a batch smaller than batchSize waits to fill before it is written (0: at once); it
   * is written as soon as batchSize rows are queued, whichever comes first.
   */
  lingerMs?: number
  /** true while someone waits for the queue to drain (flush, close): no lingering then. */
  urgent?: () => boolean
  /** Each batch, once every item in it is in the database or quarantined, in order. */
  done(batch: T[]): void
}

const MAX_BACKOFF_MS = 5_000

export class DbStage<T extends StageItem> {
  readonly #o: DbStageOptions<T>
  readonly #queue: T[] = []
  #pumping: Promise<void> | undefined
  #stopped = false
  #wakeBackoff: (() => void) | undefined
  #wakeLinger: (() => void) | undefined

  constructor(opts: DbStageOptions<T>) {
    this.#o = opts
  }

  get length(): number {
    return this.#queue.length
  }

  enqueue(it: T): void {
    this.#queue.push(it)
    this.#kick()
  }

  enqueueAll(items: readonly T[]): void {
    for (const it of items) this.#queue.push(it)
    this.#kick()
  }

  /** Ends a linger now (someone waits for the queue to drain). */
  hurry(): void {
    this.#wakeLinger?.()
  }

  /** Stops retrying (shutdown past its deadline); what is not written stays queued. */
  stop(): void {
    this.#stopped = true
    this.#wakeBackoff?.()
    this.#wakeLinger?.()
  }

  #kick(): void {
    // A full batch ends a linger at once: the bound in rows, next to lingerMs the bound in time.
    if (this.#queue.length >= this.#o.batchSize) this.#wakeLinger?.()
    this.#pumping ??= this.#pump()
      .catch((err: unknown) => this.#o.logger.error({ err: errorInfo(err) }, 'audit: writer loop failed'))
      .finally(() => {
        this.#pumping = undefined
        if (this.#queue.length > 0 && !this.#stopped) this.#kick()
      })
  }

  async #pump(): Promise<void> {
    let backoff = 50
    while (this.#queue.length > 0 && !this.#stopped) {
      await this.#linger()
      const batch = this.#queue.splice(0, this.#o.batchSize)
      try {
        const quarantined = batch.filter((i) => i.q)
        if (quarantined.length > 0) await this.#quarantine(quarantined.map((i) => i.q!))
        const rows = batch.filter((i) => !i.q)
        if (rows.length > 0) await this.#writeRows(rows)
      } catch (err) {
        // Unreachable by design; if it happens, the batch is kept and tried again (inserts are idempotent).
        this.#o.logger.error({ err: errorInfo(err) }, 'audit: BUG: writing a batch failed unexpectedly; retrying')
        this.#queue.unshift(...batch)
        await this.#pause(backoff)
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS)
        continue
      }
      backoff = 50
      if (this.#stopped) {
        this.#queue.unshift(...batch)
        return
      }
      this.#o.done(batch)
    }
  }

  /** Lets a small batch fill for up to lingerMs or until it is full; one timer per batch, not per event. */
  async #linger(): Promise<void> {
    const ms = this.#o.lingerMs ?? 0
    if (ms <= 0 || this.#queue.length >= this.#o.batchSize || this.#o.urgent?.()) return
    await new Promise<void>((r) => {
      const t = setTimeout(r, ms)
      this.#wakeLinger = () => {
        clearTimeout(t)
        r()
      }
    })
    this.#wakeLinger = undefined
  }

  #pause(ms: number): Promise<void> {
    return new Promise<void>((r) => {
      const t = setTimeout(r, ms)
      this.#wakeBackoff = () => {
        clearTimeout(t)
        r()
      }
    }).finally(() => (this.#wakeBackoff = undefined))
  }

  /** Runs `op` until it succeeds or fails with a data error (returned); transient errors back off. */
  async #attempt(op: () => Promise<void>, what: string, events: number): Promise<unknown> {
    const { stats, logger } = this.#o
    let backoff = 50
    for (let n = 1; !this.#stopped; n++) {
      try {
        await op()
        stats.failing = undefined
        return undefined
      } catch (err) {
        if (classifyFailure(err) === 'data') return err ?? new Error('unknown failure')
        stats.retries++
        stats.failing = describeFailure(err)
        logger.error({ err: errorInfo(err), attempt: n, events }, `audit: ${what} failed (database unavailable); retrying`)
        await this.#pause(backoff)
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS)
      }
    }
    return undefined
  }

  async #quarantine(records: QuarantineRecord[]): Promise<void> {
    const { stats, logger, store } = this.#o
    // The quarantine is plain text: a failure here is the database's, so it is retried, never split.
    let backoff = 50
    for (let n = 1; !this.#stopped; n++) {
      try {
        await store.audit.quarantine(records)
        stats.quarantined += records.length
        return
      } catch (err) {
        stats.retries++
        stats.failing = describeFailure(err)
        logger.error({ err: errorInfo(err), attempt: n, events: records.length }, 'audit: quarantine insert failed; retrying')
        await this.#pause(backoff)
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS)
      }
    }
  }

  /** Writes rows; a refused batch is bisected until the refused event is alone, then quarantined. */
  async #writeRows(items: T[]): Promise<void> {
    const { stats, logger, store } = this.#o
    let ids: string[] = []
    const err = await this.#attempt(async () => {
      ids = await store.audit.insertEncodedReturningIds(items.map((i) => i.line!))
    }, 'batch insert', items.length)
    if (this.#stopped) return
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
      const event = storedEvent(items[0])
      await this.#quarantine([quarantineRecord(event, event, reason)])
      return
    }
    const mid = items.length >>> 1
    await this.#writeRows(items.slice(0, mid))
    await this.#writeRows(items.slice(mid))
  }
}

/** The whole event of an item: from its line when the item kept only the id and org (a journaled one). */
function storedEvent(item: StageItem): AuditEvent {
  if (item.line === undefined) return item.event
  try {
    const { ts: _ts, ...event } = JSON.parse(item.line) as AuditEvent & { ts?: number }
    return event
  } catch {
    return item.event
  }
}

export function errorInfo(err: unknown): { message: string; code?: string } {
  const e = err as { message?: string; code?: string }
  return { message: e?.message ?? String(err), ...(e?.code ? { code: e.code } : {}) }
}
