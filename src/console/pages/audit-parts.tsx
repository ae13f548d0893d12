// The audit explorer's pieces: the filter editor, the column picker and the row drawer.
import { useEffect, useRef, useState, type ReactNode } from 'react'
import { ALL_COLUMNS, FILTER_COLUMNS, splitFilter } from '../audit-query.js'
import type { AuditEvent } from '../wire.js'

export function FilterEditor(props: { filters: readonly string[]; onChange: (filters: string[]) => void }): ReactNode {
  const [column, setColumn] = useState<string>('event_type')
  const [op, setOp] = useState<'=' | '!='>('=')
  const [value, setValue] = useState('')
  const add = () => {
    props.onChange([...props.filters, `${column}${op}${value.trim()}`])
    setValue('')
  }
  return (
    <fieldset className="filters">
      <legend>Filters</legend>
      <ul aria-label="Active filters" className="chips">
        {props.filters.map((f, i) => {
          const parts = splitFilter(f)
          return (
            <li key={`${f}-${i}`}>
              <code>{`${parts.column}${parts.op}${parts.value}`}</code>{' '}
              <button type="button" aria-label={`Remove filter ${f}`} onClick={() => props.onChange(props.filters.filter((_, j) => j !== i))}>
                ×
              </button>
            </li>
          )
        })}
      </ul>
      <label htmlFor="filter-column">Column</label>
      <select id="filter-column" value={column} onChange={(e) => setColumn(e.target.value)}>
          {FILTER_COLUMNS.map((c) => (
            <option key={c}>{c}</option>
          ))}
      </select>
      <label htmlFor="filter-op">Operator</label>
      <select id="filter-op" value={op} onChange={(e) => setOp(e.target.value as '=' | '!=')}>
          <option value="=">is one of (=)</option>
          <option value="!=">is not (!=)</option>
      </select>
      <label htmlFor="filter-values">Values (comma-separated)</label>
      <input id="filter-values" value={value} onChange={(e) => setValue(e.target.value)} onKeyDown={(e) => e.key === 'Enter' && (e.preventDefault(), add())} />
      <button type="button" onClick={add} disabled={op === '=' && value.trim() === ''}>
        Add filter
      </button>
    </fieldset>
  )
}

export function ColumnPicker(props: { columns: readonly string[]; onChange: (columns: string[]) => void }): ReactNode {
  const [open, setOpen] = useState(false)
  return (
    <div className="picker">
      <button type="button" aria-expanded={open} aria-controls="column-picker" onClick={() => setOpen(!open)}>
        Columns ({props.columns.length})
      </button>
      {open && (
        <fieldset id="column-picker" className="columns">
          <legend>Shown columns</legend>
          {ALL_COLUMNS.map((c) => (
            <label key={c} className="inline">
              <input
                type="checkbox"
                checked={props.columns.includes(c)}
                onChange={(e) => props.onChange(e.target.checked ? ALL_COLUMNS.filter((x) => x === c || props.columns.includes(x)) : props.columns.filter((x) => x !== c))}
              />
              {c}
            </label>
          ))}
        </fieldset>
      )}
    </div>
  )
}

/** The whole event, as the API returned it; Escape or the button closes it and focus returns. */
export function RowDrawer(props: { event: AuditEvent; onClose: () => void }): ReactNode {
  const close = useRef<HTMLButtonElement>(null)
  useEffect(() => {
    close.current?.focus()
    const onKey = (e: KeyboardEvent) => e.key === 'Escape' && props.onClose()
    window.addEventListener('keydown', onKey)
    return () => window.removeEventListener('keydown', onKey)
  }, [props.event.id])
  return (
    <aside className="drawer" role="dialog" aria-modal="false" aria-labelledby="drawer-title">
      <h2 id="drawer-title">
        {props.event.event_type} <span className="muted mono">{props.event.id}</span>
      </h2>
      <button type="button" ref={close} onClick={props.onClose}>
        Close
      </button>
      <pre aria-label="Event JSON">{JSON.stringify(props.event, null, 2)}</pre>
    </aside>
  )
}
