// The audit writer's options, counters, public interface and shutdown error (src/audit/writer.ts).
import type { AuditSink } from '../contract/index.js'
import type { JournalDurability } from './journal.js'

export interface AuditWriterLogger {
  error(obj: object, msg: string): void
  warn?(obj: object, msg: string): void
}

export interface AuditWriterOptions {
  /** Rows per insert transaction (default 2,000). */
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
  /**
   * With a journal: how long a database batch may wait to fill before it is written (default
   * 100 ms; 0 writes each as soon as the previous commits); a batch that reaches batchSize rows is
   * written at once. Durability is the journal's, so this only delays the row's arrival in the
   * database (and on the live bus); flush() and close() do not wait for it.
   */
  dbLingerMs?: number
  /**
   * With a journal: what an acknowledged event survives (default `process`: a crash of this
   * process; `host`: a crash of the host, each group fdatasync'ed before it is acknowledged).
   * docs/reliability.md "Journal durability".
   */
  journalDurability?: JournalDurability
  /** With `process` durability: the background fdatasync period (default 100 ms). */
  journalSyncIntervalMs?: number
  /**
   * With a journal: the shortest time between the starts of two journal writes (default 1 ms
   * with `host` durability, 0 with `process`).
   * Events arriving meanwhile share the next write; see src/audit/group-commit.ts for the trade.
   */
  journalIntervalMs?: number
  /** Journal segment size before rotation (default 8 MiB). */
  journalSegmentBytes?: number
  /** With a journal: bytes of its standby segment, kept allocated for a full disk (default 4 MiB; journal.ts). */
  journalReserveBytes?: number
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
  journal?: { segments: number; bytes: number; degraded?: string }
  /** The last database failure, while the writer is retrying. */
  failing?: string
}

export interface AuditWriter extends AuditSink {
  admit(): void
  /** Resolves when every event emitted before the call is in the database (or quarantined). */
  flush(): Promise<void>
  /** Refuses further events, flushes within drainTimeoutMs (see the file comment). */
  close(): Promise<void>
  stats(): AuditWriterStats
  /**
   * Whether a full batch or more waits for the database: the writer is committing back to back
   * (the provable log's appender yields to it meanwhile); a field read, no I/O.
   */
  backlogged(): boolean
  /** Whether a row emitted now can be made durable (journal healthy, or the database taking rows); a field read, no I/O. */
  writable(): boolean
}
