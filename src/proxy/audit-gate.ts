// Fail closed on the audit log (docs/reliability.md, "The database goes away"): a request is only
// forwarded when its decision row can be recorded. The sink says so by refusing an emit with the
// audit log's back-pressure error (src/audit's AuditUnavailableError: queue full, writer closed,
// durability timed out; it carries a retry hint). From that moment
// until the hint has passed, or until a later row is accepted, the runner denies new requests
// `audit_unavailable` (503, Retry-After) before anything leaves. Every deny still tries its own
// row, so the first one the log takes again reopens the gate.
// Before that, the gate asks the sink whether a row written now can be made durable at all
// (`AuditSink.writable`: the journal's disk full or failing, and the database not taking rows):
// a request is not forwarded on the hope that its row, written after the upstream answered, will fit.
import { AuditUnavailableError } from '../audit/index.js'
import type { AuditSink } from '../contract/index.js'

/** Retry-After while the sink says it cannot make a row durable (it checks again every request). */
const UNWRITABLE_RETRY_S = 1

export class AuditGate {
  #closedUntil = 0
  #retryAfterS = 1
  readonly #sink: Pick<AuditSink, 'writable'> | undefined

  constructor(sink?: Pick<AuditSink, 'writable'>) {
    this.#sink = sink
  }

  /** Seconds to tell a client to wait when the gate is closed now; undefined when it is open. */
  closedFor(now = Date.now()): number | undefined {
    if (now < this.#closedUntil) return this.#retryAfterS
    return this.#sink?.writable?.() === false ? UNWRITABLE_RETRY_S : undefined
  }

  accepted(): void {
    this.#closedUntil = 0
  }

  /** Records a refused emit; returns the Retry-After seconds when it was the log's back-pressure. */
  refused(err: unknown, now = Date.now()): number | undefined {
    const retry = unavailableRetry(err)
    if (retry === undefined) return undefined
    this.#retryAfterS = retry
    this.#closedUntil = now + retry * 1000
    return retry
  }
}

/** The retry hint of the audit log's back-pressure error; undefined for any other error. */
export function unavailableRetry(err: unknown): number | undefined {
  if (!(err instanceof AuditUnavailableError)) return undefined
  const s = err.retryAfterSeconds
  return Number.isFinite(s) && s > 0 && s <= 3_600 ? Math.ceil(s) : 1
}

/**
 * Whether a refused row is still kept by the log and written once it can (its durability deadline
 * passed with the event queued), as opposed to refused outright (queue full, writer closed).
 */
export function rowKept(err: unknown): boolean {
  return err instanceof AuditUnavailableError && err.condition === 'timeout'
}
