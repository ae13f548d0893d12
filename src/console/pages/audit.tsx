// Audit explorer: GET /v1/audit with every filter the API has (counter included), a time range,
// order and page size, cursor paging, a column picker, a row drawer, NDJSON/CSV export of the
// current query, and a live tail (the activity stream with the same filters, newest first).
import { useEffect, useState, type ReactNode } from 'react'
import { apiQuery, cell, DEFAULT_COLUMNS, download, exportEvents, paramsOf, queryFromParams, toCsv, toIso, toNdjson, type AuditQueryState } from '../audit-query.js'
import type { Route } from '../router.js'
import { useSession } from '../session.js'
import { follow } from '../sse.js'
import { ErrorBox, Status, useAction, useLoad } from '../ui.js'
import type { AuditEvent, AuditOrder } from '../wire.js'
import { ColumnPicker, FilterEditor, RowDrawer } from './audit-parts.js'

const TAIL_KEEP = 500

// long-function: the explorer's state (query, cursor stack, tail, drawer) reads best in one place
export function AuditPage(props: { route: Route }): ReactNode {
  const { api } = useSession()
  const q = queryFromParams(props.route.params)
  const key = paramsOf(q).toString()
  const [cursors, setCursors] = useState<string[]>([])
  const [columns, setColumns] = useState<string[]>(DEFAULT_COLUMNS)
  const [picked, setPicked] = useState<AuditEvent>()
  const [tail, setTail] = useState(false)
  const [tailed, setTailed] = useState<AuditEvent[]>([])
  const exporting = useAction()
  useEffect(() => setCursors([]), [key])
  const cursor = cursors.at(-1)
  const page = useLoad((signal) => api.get<{ events: AuditEvent[]; cursor?: string }>('/audit', apiQuery(q, cursor), signal), [key, cursor])
  useEffect(() => {
    if (!tail) return
    const ctl = new AbortController()
    setTailed([])
    void follow(api, { path: '/activity/stream', anchorPath: '/audit', query: { filter: q.filters }, signal: ctl.signal, onEvent: (e) => setTailed((old) => [e, ...old].slice(0, TAIL_KEEP)) })
    return () => ctl.abort()
  }, [tail, key])
  const setQuery = (next: Partial<AuditQueryState>) => {
    location.hash = `#/audit?${paramsOf({ ...q, ...next }).toString()}`
  }
  const [exported, setExported] = useState<string>()
  const exportAs = (format: 'ndjson' | 'csv') =>
    void exporting.run(async () => {
      setExported(undefined)
      const { events, truncated } = await exportEvents(api, q)
      setExported(truncated ? `Exported the first ${events.length} events: the query has more (narrow it with a filter or a time range).` : `Exported ${events.length} events.`)
      if (format === 'ndjson') download('audit.ndjson', 'application/x-ndjson', toNdjson(events))
      else download('audit.csv', 'text/csv', toCsv(events, columns))
    })
  const rows = tail ? tailed : (page.data?.events ?? [])
  return (
    <section aria-labelledby="audit-title">
      <h1 id="audit-title">Audit explorer</h1>
      <FilterEditor filters={q.filters} onChange={(filters) => setQuery({ filters })} />
      <div className="filters">
        <label>
          From
          <input type="datetime-local" value={q.from} onChange={(e) => setQuery({ from: e.target.value })} />
        </label>
        <label>
          To
          <input type="datetime-local" value={q.to} onChange={(e) => setQuery({ to: e.target.value })} />
        </label>
        <label>
          Order
          <select value={q.order} onChange={(e) => setQuery({ order: e.target.value as AuditOrder })}>
            <option value="desc">newest first</option>
            <option value="asc">oldest first</option>
          </select>
        </label>
        <label>
          Page size
          <select value={q.limit} onChange={(e) => setQuery({ limit: Number(e.target.value) })}>
            {[25, 100, 500, 1000].map((n) => (
              <option key={n}>{n}</option>
            ))}
          </select>
        </label>
        <ColumnPicker columns={columns} onChange={setColumns} />
        <label className="inline">
          <input type="checkbox" checked={tail} onChange={(e) => setTail(e.target.checked)} /> Live tail
        </label>
        <button type="button" onClick={() => exportAs('ndjson')} disabled={exporting.busy}>
          Export NDJSON
        </button>
        <button type="button" onClick={() => exportAs('csv')} disabled={exporting.busy}>
          Export CSV
        </button>
      </div>
      <p className="muted" data-testid="audit-range">
        {q.from || q.to ? `${toIso(q.from) ?? '…'} → ${toIso(q.to) ?? 'now'}` : 'all time'}
        {tail ? ' · live: new matching events appear at the top' : ''}
      </p>
      <ErrorBox error={exporting.error} />
      {exported && (
        <p role="status" className="muted" data-testid="export-status">
          {exported}
        </p>
      )}
      {!tail && <Status loaded={page} />}
      <table aria-label="Audit events">
        <thead>
          <tr>
            {columns.map((c) => (
              <th scope="col" key={c}>
                {c}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((e) => (
            <tr key={e.id} className="clickable" onClick={() => setPicked(e)}>
              {columns.map((c, i) => (
                <td key={c} className={c === 'decision' ? (e.decision ?? '') : undefined}>
                  {i === 0 ? (
                    <button type="button" className="linkish" onClick={() => setPicked(e)}>
                      {cell(e, c) || '(details)'}
                    </button>
                  ) : (
                    cell(e, c)
                  )}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
      {!tail && rows.length === 0 && !page.loading && !page.error && <p>No events match.</p>}
      {!tail && (
        <div className="actions">
          <button type="button" disabled={cursors.length === 0} onClick={() => setCursors([])}>
            First page
          </button>
          <button type="button" disabled={cursors.length === 0} onClick={() => setCursors(cursors.slice(0, -1))}>
            Previous page
          </button>
          <button type="button" disabled={!page.data?.cursor} onClick={() => setCursors([...cursors, page.data!.cursor!])}>
            Next page
          </button>
          <span className="muted">page {cursors.length + 1}</span>
        </div>
      )}
      {picked && <RowDrawer event={picked} onClose={() => setPicked(undefined)} />}
    </section>
  )
}
