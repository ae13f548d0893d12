// The forms of the list pages: fields declared as data (text, secret, URL, number, one of a list,
// several of a list, a file), rendered with their labels, and what an edit changed as a PATCH body.
import { type FormEvent, type ReactNode } from 'react'
import { ErrorBox } from './ui.js'

export type Option = string | { readonly value: string; readonly label: string }

export interface Field {
  readonly name: string
  readonly label: string
  readonly type?: 'text' | 'password' | 'select' | 'multiselect' | 'textarea' | 'url' | 'number' | 'file'
  readonly options?: readonly Option[]
  readonly required?: boolean
  /** For an edit: send '' as it is instead of null (a value of its own, e.g. pool_policy ""). */
  readonly emptyIsValue?: boolean
}

/** Text fields hold a string, multiselect a list, file the chosen File. */
export type Value = string | string[] | File | undefined
export type Values = Record<string, Value>

const optionOf = (o: Option) => (typeof o === 'string' ? { value: o, label: o } : o)

export function FieldInput(props: { field: Field; idPrefix: string; value: Value; onChange: (value: Value) => void }): ReactNode {
  const f = props.field
  const id = `${props.idPrefix}-${f.name}`
  const text = typeof props.value === 'string' ? props.value : ''
  let input: ReactNode
  if (f.type === 'select') {
    input = (
      <select id={id} value={text} required={f.required} onChange={(e) => props.onChange(e.target.value)}>
        <option value="">{f.required ? 'choose…' : '(unset)'}</option>
        {(f.options ?? []).map(optionOf).filter((o) => o.value !== '').map((o) => (
          <option key={o.value} value={o.value}>
            {o.label}
          </option>
        ))}
      </select>
    )
  } else if (f.type === 'multiselect') {
    const chosen = Array.isArray(props.value) ? props.value : []
    input = (
      <select id={id} multiple value={chosen} onChange={(e) => props.onChange([...e.target.selectedOptions].map((o) => o.value))}>
        {(f.options ?? []).map(optionOf).map((o) => (
          <option key={o.value} value={o.value}>
            {o.label}
          </option>
        ))}
      </select>
    )
  } else if (f.type === 'textarea') {
    input = <textarea id={id} value={text} required={f.required} onChange={(e) => props.onChange(e.target.value)} />
  } else if (f.type === 'file') {
    input = <input id={id} type="file" required={f.required} onChange={(e) => props.onChange(e.target.files?.[0])} />
  } else {
    input = <input id={id} type={f.type ?? 'text'} autoComplete="off" value={text} required={f.required} onChange={(e) => props.onChange(e.target.value)} />
  }
  return (
    <div>
      <label htmlFor={id}>{f.label}</label>
      {input}
    </div>
  )
}

export function FieldsForm(props: {
  label: string
  idPrefix: string
  fields: readonly Field[]
  values: Values
  onChange: (values: Values) => void
  onSubmit: () => void
  submitLabel: string
  busy: boolean
  error: unknown
  onCancel?: () => void
}): ReactNode {
  const submit = (e: FormEvent) => {
    e.preventDefault()
    props.onSubmit()
  }
  return (
    <form onSubmit={submit} aria-label={props.label} className="create">
      {props.fields.map((f) => (
        <FieldInput key={f.name} field={f} idPrefix={props.idPrefix} value={props.values[f.name]} onChange={(v) => props.onChange({ ...props.values, [f.name]: v })} />
      ))}
      <div className="actions">
        <button type="submit" className="primary" disabled={props.busy}>
          {props.submitLabel}
        </button>
        {props.onCancel && (
          <button type="button" onClick={props.onCancel}>
            Cancel
          </button>
        )}
      </div>
      <ErrorBox error={props.error} />
    </form>
  )
}

/** A field's value as the API takes it: numbers as numbers, '' as null (clears it) unless it is a value. */
export function wireValue(f: Field, v: Value): unknown {
  if (Array.isArray(v) || v instanceof File) return v
  const s = v ?? ''
  if (s === '') return f.emptyIsValue ? '' : null
  return f.type === 'number' ? Number(s) : s
}

/** The fields whose value differs from `initial`, as a PATCH body (nothing changed: empty). */
export function changedValues(fields: readonly Field[], initial: Values, values: Values): Record<string, unknown> {
  const body: Record<string, unknown> = {}
  for (const f of fields) {
    const before = JSON.stringify(wireValue(f, initial[f.name]))
    const after = wireValue(f, values[f.name])
    if (JSON.stringify(after) !== before) body[f.name] = after
  }
  return body
}

/** The filled fields as a create body (empty ones left out). */
export function filledValues(fields: readonly Field[], values: Values): Record<string, unknown> {
  const body: Record<string, unknown> = {}
  for (const f of fields) {
    const v = wireValue(f, values[f.name])
    if (v !== null && !(Array.isArray(v) && v.length === 0)) body[f.name] = v
  }
  return body
}
