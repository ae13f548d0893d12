// Follows a live activity stream (SSE: `event: activity`, `id: <event id>`, `data: <audit event>`)
// through followSse (sse.ts: reconnects, resumes with Last-Event-ID, a refused connection ends it
// with the server's envelope, so a revoked key stops `tail` with the server's own message).

import type { AuditEvent } from '../contract/index.js'
import type { CorralClient } from './client.js'
import type { ApiError } from './errors.js'
import { followSse } from './sse.js'

export interface FollowOptions {
  readonly workspaceId?: string
  /** Audit filter grammar; the server applies it before sending (and replays only matching events). */
  readonly filter?: readonly string[]
  /** Resume after this event id (sent as Last-Event-ID on the first connection). */
  readonly lastEventId?: string
  /**
   * Without `lastEventId`, anchor the stream at the newest stored event before connecting, so a
   * reconnect that happens before the first event arrives still resumes without a gap. Needs audit
   * read access; without it the stream simply starts live. Default true.
   */
  readonly anchor?: boolean
  readonly signal?: AbortSignal
  readonly onEvent: (event: AuditEvent) => void
  /** Called when the connection dropped and the client is about to reconnect. */
  readonly onReconnecting?: (lastEventId: string | undefined) => void
  readonly onOpen?: () => void
}

async function newestEventId(client: CorralClient, workspaceId: string | undefined): Promise<string | undefined> {
  try {
    const page = await client.queryAudit({ order: 'desc', limit: 1 }, { workspaceId })
    return page.events[0]?.id
  } catch (error) {
    // No audit read permission is not a reason to refuse following; anything else is reported.
    if ((error as ApiError).status === 403) return undefined
    throw error
  }
}

/**
 * Resolves when `signal` aborts; rejects with the ApiError of a refused connection (401, 403, 404…)
 * or when the data of an event is not JSON.
 */
export async function followActivity(client: CorralClient, options: FollowOptions): Promise<void> {
  const url = client.activityStreamUrl({ workspaceId: options.workspaceId }, options.filter)
  const lastEventId = options.lastEventId ?? (options.anchor === false ? undefined : await newestEventId(client, options.workspaceId))
  await followSse<AuditEvent>(client, url, {
    event: 'activity',
    what: 'activity stream',
    lastEventId,
    signal: options.signal,
    onMessage: options.onEvent,
    onOpen: options.onOpen,
    onReconnecting: options.onReconnecting,
  })
}
