// How one audit event reads in a timeline: a policy decision shows allow/deny, the reason, the
// request and the debits inline; an agent event its text; anything else its type and key fields.
import type { ReactNode } from 'react'
import { when } from './ui.js'
import type { AuditEvent } from './wire.js'

function text(value: unknown, max = 200): string {
  const s = typeof value === 'string' ? value : value === undefined ? '' : JSON.stringify(value)
  return s.length > max ? `${s.slice(0, max)}…` : s
}

function debits(e: AuditEvent): string {
  const d = Object.entries(e.debits ?? {})
  return d.length ? ` · debits ${d.map(([k, v]) => `${k}=${v}`).join(', ')}` : ''
}

/** One line of what happened. */
export function summary(e: AuditEvent): ReactNode {
  if (e.event_type === 'policy_decision') {
    return (
      <span>
        <strong className={e.decision === 'deny' ? 'deny' : 'allow'}>{e.decision}</strong>
        {e.reason ? ` ${e.reason}` : ''} · {e.method} {e.destination}
        {e.path ?? ''}
        {e.capability_name ? ` · ${e.capability_name}` : ''}
        {debits(e)}
      </span>
    )
  }
  const d = e.detail ?? {}
  if (e.actor === 'agent') {
    const body = d.text ?? d.message ?? d.status ?? d.summary ?? d.name ?? d.tool ?? d.path ?? d
    return <span>{text(body)}</span>
  }
  if (e.event_type === 'task_completed') return <span>{text(d.status)}{d.reason ? ` (${text(d.reason)})` : ''}</span>
  if (e.event_type === 'task_submitted') return <span>{text(d.description ?? '', 120)}</span>
  return <span className="muted">{Object.keys(d).length ? text(d, 160) : ''}</span>
}

export function Timeline(props: { events: readonly AuditEvent[]; label: string; onPick?: (e: AuditEvent) => void }): ReactNode {
  return (
    // tabIndex: a scrollable region must be reachable from the keyboard.
    <ol className="timeline" aria-label={props.label} aria-live="polite" tabIndex={0}>
      {props.events.map((e) => (
        <li key={e.id} data-event-type={e.event_type} data-decision={e.decision}>
          <time dateTime={e.timestamp}>{when(e.timestamp)}</time>
          {props.onPick ? (
            <button type="button" className="linkish" onClick={() => props.onPick!(e)}>
              {e.event_type}
            </button>
          ) : (
            <span className="mono">{e.event_type}</span>
          )}
          {summary(e)}
        </li>
      ))}
    </ol>
  )
}
