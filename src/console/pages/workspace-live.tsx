// A workspace's live timeline: its history (GET /v1/workspaces/{id}/audit, oldest first), then its
// activity stream from the last event of that history on (Last-Event-ID), so nothing is missed or
// shown twice; a dropped stream resumes from the last event it delivered (sse.ts).
import { useEffect, useState, type ReactNode } from 'react'
import { seg } from '../api.js'
import { Timeline } from '../events.js'
import { useSession } from '../session.js'
import { follow } from '../sse.js'
import { ErrorBox } from '../ui.js'
import type { AuditEvent } from '../wire.js'

const HISTORY = 500
const KEEP = 2000

export function WorkspaceTimeline(props: { id: string; onEvent?: (e: AuditEvent) => void }): ReactNode {
  const { api, can } = useSession()
  const [events, setEvents] = useState<AuditEvent[]>([])
  const [state, setState] = useState<string>('connecting')
  const [error, setError] = useState<unknown>()
  const [decisionsOnly, setDecisionsOnly] = useState(false)
  useEffect(() => {
    const ctl = new AbortController()
    const seen = new Set<string>()
    const add = (batch: AuditEvent[]) => {
      const fresh = batch.filter((e) => !seen.has(e.id) && seen.add(e.id))
      if (fresh.length) setEvents((old) => [...old, ...fresh].slice(-KEEP))
      for (const e of fresh) props.onEvent?.(e)
    }
    setEvents([])
    void (async () => {
      let last: string | undefined
      if (can('audit:read')) {
        try {
          const page = await api.get<{ events: AuditEvent[] }>(`/workspaces/${seg(props.id)}/audit`, { order: 'desc', limit: HISTORY }, ctl.signal)
          const history = page.events.reverse()
          last = history.at(-1)?.id
          add(history)
        } catch (err) {
          if (!ctl.signal.aborted) setError(err)
        }
      }
      await follow(api, {
        path: `/workspaces/${seg(props.id)}/activity/stream`,
        signal: ctl.signal,
        lastEventId: last,
        ...(last ? {} : { anchorPath: `/workspaces/${seg(props.id)}/audit` }),
        onEvent: (e) => add([e]),
        onState: (s, failure) => {
          setState(s)
          if (failure) setError(failure)
        },
      })
    })()
    return () => ctl.abort()
  }, [props.id])
  const shown = decisionsOnly ? events.filter((e) => e.event_type === 'policy_decision') : events
  return (
    <section aria-labelledby="timeline-title">
      <h2 id="timeline-title">
        Timeline <span className="muted" data-stream-state={state}>({state === 'live' ? 'live' : state})</span>
      </h2>
      <label className="inline">
        <input type="checkbox" checked={decisionsOnly} onChange={(e) => setDecisionsOnly(e.target.checked)} /> policy decisions only
      </label>
      <ErrorBox error={error} />
      {shown.length === 0 ? <p className="muted">No events yet.</p> : <Timeline events={shown} label="Workspace events" />}
    </section>
  )
}
