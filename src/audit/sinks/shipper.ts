// Ships the audit log to one receiver (docs/audit.md "OTLP streaming"). One replica at a time holds
// the sink's lease (store: audit_sink_cursors); it reads the rows after the sink's cursor in export
// order, sends them as one request, and moves the cursor only after the receiver answered 2xx, with
// a conditional update that fails if the lease was lost meanwhile. A receiver that is down, slow or
// answering 5xx/429 is retried with backoff (Retry-After honoured) for as long as it takes, holding
// the same rows: no row is skipped and none is sent past one that was not acknowledged. The one
// window for a row to arrive twice is a crash (or a lost lease) between the receiver's 2xx and the
// cursor's update; every record carries the row id for the receiver to dedupe on.
import { setTimeout as sleep } from 'node:timers/promises'
import type { Logger } from 'pino'
import type { AuditEvent } from '../../contract/index.js'
import { auditSinkCursors, type AuditSinkCursors, type ExportedRow, type Store } from '../../store/index.js'
import { loadOtlp, toOcsf, type OtlpResource } from '../export/index.js'
import type { AuditSinkConfig } from './config.js'

const BACKOFF_MIN_MS = 200
const BACKOFF_MAX_MS = 30_000
const RETRY_AFTER_MAX_MS = 300_000

export interface ShipperStats {
  sink: string
  /** Rows the receiver acknowledged since this process started. */
  shipped: number
  /** Rows the receiver acknowledged but said it rejected (OTLP partial_success, or a row refused alone with 400). */
  rejected: number
  retries: number
  /** The last failure while retrying, cleared by the next success. */
  failing?: string
  /** Whether this replica holds the sink's lease now. */
  leader: boolean
}

export interface ShipperOptions {
  store: Store
  sink: AuditSinkConfig
  /** This process's lease holder id (the replica id). */
  holder: string
  logger: Logger
  resource: OtlpResource
  leaseTtlMs?: number
  /** How often an idle shipper looks for new rows. */
  pollMs?: number
}

class RequestFailed extends Error {
  constructor(message: string, readonly status?: number, readonly retryAfterMs?: number) {
    super(message)
  }
}

/** A receiver's Retry-After (seconds or an HTTP date), bounded. */
function retryAfterMs(value: string | null): number | undefined {
  if (!value) return undefined
  const secs = Number(value)
  const ms = Number.isFinite(secs) ? secs * 1000 : Date.parse(value) - Date.now()
  return Number.isFinite(ms) && ms >= 0 ? Math.min(ms, RETRY_AFTER_MAX_MS) : undefined
}

export class AuditShipper {
  private readonly cursors: AuditSinkCursors
  private readonly ttlMs: number
  private readonly pollMs: number
  private readonly stop$ = new AbortController()
  private loop: Promise<void> | undefined
  private readonly counters: ShipperStats
  /** Shrinks when the receiver refuses a request as too large or malformed, to isolate the row. */
  private batchSize: number

  constructor(private readonly o: ShipperOptions) {
    this.cursors = auditSinkCursors(o.store)
    this.ttlMs = o.leaseTtlMs ?? 30_000
    this.pollMs = o.pollMs ?? 1_000
    this.batchSize = o.sink.batchSize
    this.counters = { sink: o.sink.name, shipped: 0, rejected: 0, retries: 0, leader: false }
  }

  start(): void {
    this.loop ??= this.run().catch((err: unknown) => this.o.logger.error({ err, sink: this.o.sink.name }, 'audit sink: stopped'))
  }

  /** Stops after the request in flight (its rows stay behind the cursor) and gives the lease up. */
  async stop(): Promise<void> {
    this.stop$.abort()
    await this.loop
    if (this.counters.leader) await this.cursors.release(this.o.sink.name, this.o.holder).catch(() => undefined)
    this.counters.leader = false
  }

  stats(): ShipperStats {
    return { ...this.counters }
  }

  private get stopped(): boolean {
    return this.stop$.signal.aborted
  }

  private async pause(ms: number): Promise<void> {
    await sleep(ms, undefined, { signal: this.stop$.signal }).catch(() => undefined)
  }

  private async run(): Promise<void> {
    let backoff = BACKOFF_MIN_MS
    while (!this.stopped) {
      try {
        const idle = await this.cycle()
        backoff = BACKOFF_MIN_MS
        if (idle) await this.pause(this.pollMs)
      } catch (err) {
        // The database away or a lease lost mid-request: start the cycle again from the stored cursor.
        this.counters.failing = err instanceof Error ? err.message : String(err)
        this.o.logger.warn({ err, sink: this.o.sink.name }, 'audit sink: cycle failed; retrying')
        await this.pause(backoff)
        backoff = Math.min(backoff * 2, BACKOFF_MAX_MS)
      }
    }
  }

  /** One batch: true when there was nothing to do (not the leader, or no new rows). */
  private async cycle(): Promise<boolean> {
    const name = this.o.sink.name
    const leader = await this.cursors.claim(name, this.o.holder, Date.now(), this.ttlMs)
    if (leader !== this.counters.leader) this.o.logger.info({ sink: name }, leader ? 'audit sink: shipping on this replica' : 'audit sink: another replica ships it')
    this.counters.leader = leader
    if (!leader) return true
    const cursor = await this.cursors.get(name)
    if (!cursor) return true
    const rows = await this.cursors.rowsAfter(cursor.position, this.batchSize)
    if (rows.length === 0) return true
    const sent = await this.deliver(rows)
    if (sent === undefined) return true
    const last = rows[sent.count - 1]!
    const moved = await this.cursors.advance(name, this.o.holder, cursor.position, last.position, sent.count, Date.now(), this.ttlMs)
    if (!moved) {
      this.counters.leader = false
      this.o.logger.warn({ sink: name }, 'audit sink: lease lost before the cursor moved; the new holder resends from the stored cursor')
      return false
    }
    this.counters.shipped += sent.count
    this.counters.rejected += sent.rejected
    this.counters.failing = undefined
    if (sent.count === rows.length && this.batchSize < this.o.sink.batchSize) this.batchSize = Math.min(this.batchSize * 2, this.o.sink.batchSize)
    return false
  }

  /**
   * Sends `rows` (or a prefix of them, after the receiver refused a larger request) until a 2xx;
   * returns how many rows the acknowledged request held, or undefined when stopped or the lease was lost.
   */
  private async deliver(rows: readonly ExportedRow[]): Promise<{ count: number; rejected: number } | undefined> {
    let backoff = BACKOFF_MIN_MS
    let count = Math.min(rows.length, this.batchSize)
    for (;;) {
      if (this.stopped) return undefined
      try {
        const rejected = await this.post(rows.slice(0, count).map((r) => r.event))
        return { count, rejected }
      } catch (err) {
        if (!(err instanceof RequestFailed)) throw err
        this.counters.retries++
        this.counters.failing = err.message
        if ((err.status === 413 || err.status === 400) && count > 1) {
          // Too large or one row the receiver cannot take: halve until the request goes through or the one row is isolated.
          count = Math.ceil(count / 2)
          this.batchSize = count
          continue
        }
        if (err.status === 400 && count === 1) {
          this.o.logger.error({ sink: this.o.sink.name, id: rows[0]!.event.id, err: err.message }, 'audit sink: the receiver refused this row alone (400); skipped and counted as rejected')
          return { count: 1, rejected: 1 }
        }
        this.o.logger.warn({ sink: this.o.sink.name, err: err.message, rows: count }, 'audit sink: receiver did not acknowledge; retrying')
        await this.pause(err.retryAfterMs ?? backoff)
        backoff = Math.min(backoff * 2, BACKOFF_MAX_MS)
        // Keep the lease while waiting; a replica that lost it stops here and the holder resends.
        if (!(await this.cursors.claim(this.o.sink.name, this.o.holder, Date.now(), this.ttlMs))) {
          this.counters.leader = false
          return undefined
        }
      }
    }
  }

  /** One request; resolves with the number of records the receiver said it rejected, throws RequestFailed otherwise. */
  private async post(events: readonly AuditEvent[]): Promise<number> {
    const s = this.o.sink
    const otlp = s.kind === 'otlp' ? await loadOtlp() : undefined
    const { body, contentType } = otlp && s.kind === 'otlp'
      ? otlp.encodeOtlpLogs(events, this.o.resource, s.encoding)
      : { body: Buffer.from(events.map((e) => JSON.stringify(toOcsf(e)) + '\n').join('')), contentType: 'application/x-ndjson' }
    let res: Response
    try {
      res = await fetch(s.url, {
        method: 'POST', body, headers: { ...s.headers, 'content-type': contentType },
        signal: AbortSignal.any([AbortSignal.timeout(s.timeoutMs), this.stop$.signal]),
      })
    } catch (err) {
      const cause = err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err)
      throw new RequestFailed(`${s.url}: ${cause}`)
    }
    const answer = new Uint8Array(await res.arrayBuffer().catch(() => new ArrayBuffer(0)))
    if (res.status < 200 || res.status > 299) {
      throw new RequestFailed(`${s.url} answered ${res.status}`, res.status, retryAfterMs(res.headers.get('retry-after')))
    }
    if (!otlp || s.kind !== 'otlp') return 0
    let rejected = 0
    try {
      const partial = otlp.decodeOtlpResponse(answer, s.encoding).partialSuccess
      rejected = Number(partial?.rejectedLogRecords ?? 0)
      if (rejected > 0 || partial?.errorMessage) {
        this.o.logger.warn({ sink: s.name, rejected, message: partial?.errorMessage }, 'audit sink: the receiver accepted the request partially')
      }
    } catch {
      // A 2xx whose body is not an ExportLogsServiceResponse: the receiver took the request.
    }
    return rejected
  }
}
