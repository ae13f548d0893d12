// The live audit bus: committed events, per org, to in-process subscribers (SSE streams). It
// listens on the store's notify channel, so on Postgres every `serve` process sees the events
// written by every other one (LISTEN/NOTIFY); on SQLite it sees this process's writers.
// Notifications carry ids; rows are fetched once per notification, and only for orgs someone
// here is subscribed to. Notifications are processed one at a time so subscribers see batches in
// commit order.

import type { Store } from '../store/index.js'
import type { AuditEvent } from '../contract/index.js'
import { AUDIT_CHANNEL, parseNotification } from './notify.js'

export interface AuditBusFilter {
  workspaceId?: string
  userId?: string
}

export type AuditBusHandler = (event: AuditEvent) => void

export interface AuditBus {
  /** Resolves once the bus is listening: events committed after that are delivered. */
  readonly ready: Promise<void>
  /** false while the store's LISTEN connection is down: events committed meanwhile are not delivered. */
  readonly live?: boolean
  /**
   * `onGap` runs when events may have been missed (the store's LISTEN connection dropped): the
   * subscriber must catch up from the log — a stream ends, and its client resumes with Last-Event-ID.
   */
  subscribe(orgId: string, handler: AuditBusHandler, filter?: AuditBusFilter, onGap?: () => void): () => void
  close(): Promise<void>
}

export interface AuditBusOptions {
  logger?: { error(obj: object, msg: string): void }
}

interface Subscription {
  handler: AuditBusHandler
  filter: AuditBusFilter
  onGap?: () => void
}

export function createAuditBus(store: Store, opts: AuditBusOptions = {}): AuditBus {
  const logger = opts.logger ?? { error: (obj, msg) => console.error(msg, obj) }
  const byOrg = new Map<string, Set<Subscription>>()
  let chain: Promise<void> = Promise.resolve()
  let unlisten: (() => Promise<void>) | undefined
  let closed = false

  const deliver = async (payload: string) => {
    const n = parseNotification(payload)
    if (!n || !byOrg.get(n.orgId)?.size) return
    const events = await store.audit.listByIds(n.ids)
    for (const e of events) {
      if (e.org_id !== n.orgId) continue
      for (const sub of byOrg.get(n.orgId) ?? []) {
        if (sub.filter.workspaceId !== undefined && e.workspace_id !== sub.filter.workspaceId) continue
        if (sub.filter.userId !== undefined && e.user_id !== sub.filter.userId) continue
        try {
          sub.handler(e)
        } catch (err) {
          logger.error({ err: (err as Error)?.message }, 'audit bus: subscriber threw')
        }
      }
    }
  }

  const ready = store
    .listen(AUDIT_CHANNEL, (payload) => {
      chain = chain.then(() => deliver(payload)).catch((err: unknown) => logger.error({ err: (err as Error)?.message }, 'audit bus: delivery failed'))
    })
    .then(async (stop) => {
      if (closed) await stop()
      else unlisten = stop
    })
  ready.catch((err: unknown) => logger.error({ err: (err as Error)?.message }, 'audit bus: listen failed'))
  let live = true
  const offGap = store.onListenGap?.((state) => {
    live = state === 'restored'
    if (live) return
    for (const subs of byOrg.values()) {
      for (const sub of [...subs]) {
        try {
          sub.onGap?.()
        } catch (err) {
          logger.error({ err: (err as Error)?.message }, 'audit bus: subscriber gap handler threw')
        }
      }
    }
  })

  return {
    ready,
    get live() {
      return live
    },
    subscribe(orgId, handler, filter = {}, onGap) {
      const sub: Subscription = { handler, filter, ...(onGap ? { onGap } : {}) }
      let set = byOrg.get(orgId)
      if (!set) byOrg.set(orgId, (set = new Set()))
      set.add(sub)
      return () => {
        set.delete(sub)
        if (set.size === 0 && byOrg.get(orgId) === set) byOrg.delete(orgId)
      }
    },
    async close() {
      closed = true
      offGap?.()
      byOrg.clear()
      await ready.catch(() => {})
      await unlisten?.()
      await chain
    },
  }
}
