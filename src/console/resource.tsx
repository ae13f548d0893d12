// A list page of one /v1 resource: a table of its rows with per-row actions, an optional create
// form and an optional edit form per row. The pages in pages/ (keys, members, providers, roles,
// packs, secrets, credentials) are declarations of this.
import { useState, type ReactNode } from 'react'
import { FieldsForm, type Field, type Values } from './form.js'
import { ErrorBox, Status, useAction, useLoad } from './ui.js'

export type { Field } from './form.js'

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

export interface CreateForm {
  readonly title: string
  readonly fields: readonly Field[]
  /** Returns a message to show after success (e.g. a key's secret, shown once). */
  readonly submit: (values: Values) => Promise<ReactNode | void>
}

/** An edit of one row: its fields start from `initial(row)`; `submit` gets the values. */
export interface EditForm<T> {
  /** The fields (the same for every row, or chosen per row). */
  readonly fields: readonly Field[] | ((row: T) => readonly Field[])
  readonly initial: (row: T) => Values
  /** Returns a message to show after success (e.g. warnings of the save). */
  readonly submit: (row: T, initial: Values, values: Values) => Promise<ReactNode | void>
  /** Hidden for rows where this is false. */
  readonly when?: (row: T) => boolean
  /** The row's name in the button and the form ("Edit <name>"). */
  readonly name: (row: T) => string
}

export function ResourceList<T>(props: {
  title: string
  load: (signal: AbortSignal) => Promise<T[]>
  rowKey: (row: T) => string
  columns: readonly Column<T>[]
  actions?: readonly RowAction<T>[]
  /** One create form, or several (each its own button). */
  create?: CreateForm | readonly CreateForm[]
  edit?: EditForm<T>
  /** A create form of its own (when the generic one cannot say it), shown where `create` would be. */
  createSlot?: ReactNode
  note?: ReactNode
  /** Reloads the rows when one of these changes (the page's own actions). */
  deps?: readonly unknown[]
}): ReactNode {
  const rows = useLoad(props.load, props.deps ?? [])
  const action = useAction()
  const [editing, setEditing] = useState<T>()
  const [edited, setEdited] = useState<ReactNode>()
  const edit = props.edit
  const actions: readonly RowAction<T>[] = [
    ...(edit ? [{ label: (r: T) => `Edit ${edit.name(r)}`, when: edit.when, run: async (r: T) => (setEdited(undefined), setEditing(r)) }] : []),
    ...(props.actions ?? []),
  ]
  const titleId = `${props.title.toLowerCase().replace(/\W+/g, '-')}-title`
  return (
    <section aria-labelledby={titleId}>
      <h1 id={titleId}>{props.title}</h1>
      {props.note}
      {props.create && (
        <div className="creates">
          {[props.create].flat().map((form) => (
            <Create key={form.title} form={form} onDone={rows.reload} />
          ))}
        </div>
      )}
      {props.createSlot}
      {edited && (
        <div role="status" className="notice">
          {edited}
        </div>
      )}
      {edit && editing !== undefined && (
        <Edit
          key={props.rowKey(editing)}
          form={edit}
          row={editing}
          onClose={(message) => {
            setEditing(undefined)
            if (message !== undefined) (setEdited(message), rows.reload())
          }}
        />
      )}
      <Status loaded={rows} />
      <ErrorBox error={action.error} />
      {rows.data && <Rows rows={rows.data} title={props.title} rowKey={props.rowKey} columns={props.columns} actions={actions} busy={action.busy} run={(a, row) => void action.run(() => a.run(row)).then((ok) => ok && rows.reload())} />}
      {rows.data?.length === 0 && <p>None yet.</p>}
    </section>
  )
}

function Rows<T>(props: { rows: readonly T[]; title: string; rowKey: (row: T) => string; columns: readonly Column<T>[]; actions: readonly RowAction<T>[]; busy: boolean; run: (action: RowAction<T>, row: T) => void }): ReactNode {
  const actions = props.actions
  return (
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
        {props.rows.map((row) => (
          <tr key={props.rowKey(row)}>
            {props.columns.map((c) => (
              <td key={c.label}>{c.render(row)}</td>
            ))}
            {actions.length > 0 && (
              <td>
                {actions
                  .filter((a) => a.when?.(row) ?? true)
                  .map((a) => (
                    <button key={a.label(row)} type="button" className={a.danger ? 'danger' : undefined} disabled={props.busy} onClick={() => props.run(a, row)}>
                      {a.label(row)}
                    </button>
                  ))}
              </td>
            )}
          </tr>
        ))}
      </tbody>
    </table>
  )
}

function Create(props: { form: CreateForm; onDone: () => void }): ReactNode {
  const [open, setOpen] = useState(false)
  const [values, setValues] = useState<Values>({})
  const [message, setMessage] = useState<ReactNode>()
  const action = useAction()
  const submit = () =>
    void action.run(async () => {
      const shown = await props.form.submit(values)
      setMessage(shown ?? undefined)
      setValues({})
      setOpen(false)
      props.onDone()
    })
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
        <FieldsForm label={props.form.title} idPrefix="create" fields={props.form.fields} values={values} onChange={setValues} onSubmit={submit} submitLabel="Create" busy={action.busy} error={action.error} />
      )}
    </div>
  )
}

/** The edit form of one row; `onClose(message)` with the message after a save, without one on cancel. */
function Edit<T>(props: { form: EditForm<T>; row: T; onClose: (message?: ReactNode) => void }): ReactNode {
  const [initial] = useState(() => props.form.initial(props.row))
  const [values, setValues] = useState<Values>(initial)
  const action = useAction()
  const name = props.form.name(props.row)
  const fields = typeof props.form.fields === 'function' ? props.form.fields(props.row) : props.form.fields
  const submit = () =>
    void action.run(async () => {
      const shown = await props.form.submit(props.row, initial, values)
      props.onClose(shown ?? `Saved ${name}.`)
    })
  return (
    <section aria-label={`Edit ${name}`}>
      <h2>Edit {name}</h2>
      <FieldsForm label={`Edit ${name}`} idPrefix="edit" fields={fields} values={values} onChange={setValues} onSubmit={submit} submitLabel="Save" busy={action.busy} error={action.error} onCancel={() => props.onClose()} />
    </section>
  )
}
