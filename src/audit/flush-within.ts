// Waiting for the audit writer's acknowledged events to reach the database, bounded: callers that
// answer after an effect (a read of the log, a task's end) commit its rows first, but an outage of
// the database must not hold them.
import type { AuditSink } from '../contract/index.js'

/**
 * Resolves once every event `sink` acknowledged so far is in the database, or after `ms`,
 * whichever is first; never rejects (a failed flush leaves the caller to answer on its own).
 */
export async function flushWithin(sink: Pick<AuditSink, 'flush'>, ms: number): Promise<void> {
  const flushed = sink.flush?.()
  if (!flushed) return
  let timer: NodeJS.Timeout | undefined
  const bound = new Promise<void>((r) => (timer = setTimeout(r, ms)))
  await Promise.race([flushed.catch(() => {}), bound]).finally(() => clearTimeout(timer))
}
