// The audit log cannot take an event right now: its queue is full (the database is slow or away
// and the journal's backlog reached its bound), the writer is closed, or the event could not be
// made durable in time (no working journal and the database is away). Refused at once, never a
// hang: the API answers 503 service_unavailable with Retry-After (src/server/app.ts), the proxy
// denies the request with `audit_unavailable` (fail closed: nothing is forwarded unrecorded).
import { CorralError } from '../contract/index.js'

export type AuditUnavailableCause = 'queue_full' | 'closed' | 'timeout'

export class AuditUnavailableError extends CorralError {
  constructor(
    readonly condition: AuditUnavailableCause,
    /** Seconds a client should wait before retrying (the Retry-After header). */
    readonly retryAfterSeconds: number,
    message: string,
  ) {
    super('service_unavailable', message, 503, { reason: 'audit_unavailable', retry_after_s: retryAfterSeconds })
    this.name = 'AuditUnavailableError'
  }
}
