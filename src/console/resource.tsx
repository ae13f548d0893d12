// A list page of one /v1 resource: a table of its rows with per-row actions, and an optional create
// form. The pages in pages/ (keys, members, providers, roles, packs, secrets, credentials) are
// declarations of this.
import { useState, type FormEvent, type ReactNode } from 'react'
import { ErrorBox, Status, useAction, useLoad } from './ui.js'

export interface Column<T> {
  readonly label: string
  readonly render: (row: T) => ReactNode
}

export interface RowAction<T> {
  readonly label: (row: T) => string
  readonly run: (row: T) => Promise<unknown>
  /** Hidden for rows where this is false. */
  readonly when?: (row: T) => boolean
  readonly danger?: boolean
}

export interface Field {
  readonly name: string
  readonly label: string
  readonly type?: 'text' | 'password' | 'select' | 'textarea' | 'url'
  readonly options?: readonly string[]
  readonly required?: boolean
}

export interface CreateForm {
  readonly title: string
  readonly fields: readonly Field[]
  /** Returns a message to show after success (e.g. a key's secret, shown once). */
  readonly submit: (values: Record<string, string>) => Promise<ReactNode | void>
}

export function ResourceList<T>(props: {
  title: string
  load: (signal: AbortSignal) => Promise<T[]>
  rowKey: (row: T) => string
  columns: readonly Column<T>[]
  actions?: readonly RowAction<T>[]
  create?: CreateForm
  /** A create form of its own (when the generic one cannot say it), shown where `create` would be. */
  createSlot?: ReactNode
  note?: ReactNode
  /** Reloads the rows when one of these changes (the page's own actions). */
  deps?: readonly unknown[]
}): ReactNode {
  const rows = useLoad(props.load, props.deps ?? [])
  const action = useAction()
  const actions = props.actions ?? []
  const titleId = `${props.title.toLowerCase().replace(/\W+/g, '-')}-title`
  return (
    <section aria-labelledby={titleId}>
      <h1 id={titleId}>{props.title}</h1>
      {props.note}
      {props.create && <Create form={props.create} onDone={rows.reload} />}
      {props.createSlot}
      <Status loaded={rows} />
      <ErrorBox error={action.error} />
      {rows.data && (
        <table aria-label={props.title}>
          <thead>
            <tr>
              {props.columns.map((c) => (
                <th scope="col" key={c.label}>
                  {c.label}
                </th>
              ))}
              {actions.length > 0 && <th scope="col">Actions</th>}
            </tr>
          </thead>
          <tbody>
            {rows.data.map((row) => (
              <tr key={props.rowKey(row)}>
                {props.columns.map((c) => (
                  <td key={c.label}>{c.render(row)}</td>
                ))}
                {actions.length > 0 && (
                  <td>
                    {actions
                      .filter((a) => a.when?.(row) ?? true)
                      .map((a) => (
                        <button key={a.label(row)} type="button" className={a.danger ? 'danger' : undefined} disabled={action.busy} onClick={() => void action.run(() => a.run(row)).then((ok) => ok && rows.reload())}>
                          {a.label(row)}
                        </button>
                      ))}
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {rows.data?.length === 0 && <p>None yet.</p>}
    </section>
  )
}

function Create(props: { form: CreateForm; onDone: () => void }): ReactNode {
  const [open, setOpen] = useState(false)
  const [values, setValues] = useState<Record<string, string>>({})
  const [message, setMessage] = useState<ReactNode>()
  const action = useAction()
  const submit = (e: FormEvent) => {
    e.preventDefault()
    void action.run(async () => {
      const shown = await props.form.submit(values)
      setMessage(shown ?? undefined)
      setValues({})
      setOpen(false)
      props.onDone()
    })
  }
  const id = (f: Field) => `create-${f.name}`
  return (
    <div>
      <button type="button" aria-expanded={open} onClick={() => setOpen(!open)}>
        {props.form.title}
      </button>
      {message && (
        <div role="status" className="notice">
          {message}
        </div>
      )}
      {open && (
        <form onSubmit={submit} aria-label={props.form.title} className="create">
          {props.form.fields.map((f) => (
            <div key={f.name}>
              <label htmlFor={id(f)}>{f.label}</label>
              {f.type === 'select' ? (
                <select id={id(f)} value={values[f.name] ?? ''} required={f.required} onChange={(e) => setValues({ ...values, [f.name]: e.target.value })}>
                  <option value="">choose…</option>
                  {(f.options ?? []).map((o) => (
                    <option key={o}>{o}</option>
                  ))}
                </select>
              ) : f.type === 'textarea' ? (
                <textarea id={id(f)} value={values[f.name] ?? ''} required={f.required} onChange={(e) => setValues({ ...values, [f.name]: e.target.value })} />
              ) : (
                <input id={id(f)} type={f.type ?? 'text'} autoComplete="off" value={values[f.name] ?? ''} required={f.required} onChange={(e) => setValues({ ...values, [f.name]: e.target.value })} />
              )}
            </div>
          ))}
          <button type="submit" className="primary" disabled={action.busy}>
            Create
          </button>
          <ErrorBox error={action.error} />
        </form>
      )}
    </div>
  )
}
