// A stored audit row as the bytes of its Merkle leaf: the row's values as the store returns them
// (null columns left out, JSON columns parsed, `ts` left out since it is `timestamp` in another
// unit), serialized per RFC 8785 (JSON Canonicalization Scheme): object keys sorted by UTF-16
// code units, no whitespace, numbers and strings as ECMAScript's JSON.stringify writes them. The
// encoding is of values, not of a dialect's column bytes, so SQLite TEXT and PostgreSQL JSONB
// rows give the same leaf (docs/audit.md "The leaf encoding").
import type { AuditEvent } from '../../contract/index.js'
import { AUDIT_INT_COLUMNS, AUDIT_JSON_COLUMNS } from '../../store/index.js'
import { hashLeaf, type Hash } from './tree.js'

export function canonicalJson(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return quote(value)
    case 'boolean':
      return value ? 'true' : 'false'
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError('a non-finite number has no JSON form')
      return JSON.stringify(value)
    case 'object':
      if (value === null) return 'null'
      break
    default:
      return JSON.stringify(value)
  }
  if (Array.isArray(value)) {
    let out = ''
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i]
      out += `${i ? ',' : ''}${v === undefined ? 'null' : canonicalJson(v)}`
    }
    return `[${out}]`
  }
  const obj = value as Record<string, unknown>
  const keys = Object.keys(obj)
  if (!isSorted(keys)) keys.sort()
  let out = ''
  for (const k of keys) {
    const v = obj[k]
    if (v === undefined) continue
    out += `${out ? ',' : ''}${quote(k)}:${canonicalJson(v)}`
  }
  return `{${out}}`
}

function isSorted(keys: readonly string[]): boolean {
  for (let i = 1; i < keys.length; i++) if (keys[i - 1] > keys[i]) return false
  return true
}

/** The leaf bytes of one stored row (as `store.audit` reads it). */
export function canonicalRow(row: AuditEvent): string {
  return canonicalJson(row)
}

export function rowLeafHash(row: AuditEvent): Hash {
  return hashLeaf(canonicalRow(row))
}

const JSON_COLUMNS = new Set<string>(AUDIT_JSON_COLUMNS)
const INT_COLUMNS = new Set<string>(AUDIT_INT_COLUMNS)
const NONE: ReadonlySet<string> = new Set()
let lastKeys: readonly string[] = []
let lastOmit = NONE
let lastSorted: ReadonlyArray<{ key: string; prefix: string }> = []

/**
 * The leaf bytes of a row as the driver returned it (`audit_events` columns, either dialect),
 * without building the API's object first: the same bytes as `canonicalRow(fromRow(raw))`, in one
 * pass over the columns sorted once per result shape. This is what the appender and verification
 * hash for every row. An integer column that is not a number (edited in the database) is encoded
 * as null rather than refused, so it reads as a changed row instead of stopping the log. `omit`:
 * columns of the result that are not the event's (a join's).
 */
export function storedRowBytes(raw: Readonly<Record<string, unknown>>, omit: ReadonlySet<string> = NONE): string {
  const keys = Object.keys(raw)
  if (omit !== lastOmit || !sameKeys(keys, lastKeys)) {
    lastKeys = keys
    lastOmit = omit
    lastSorted = [...keys].sort().filter((k) => k !== 'ts' && !omit.has(k)).map((key) => ({ key, prefix: `${JSON.stringify(key)}:` }))
  }
  let out = ''
  for (const { key, prefix } of lastSorted) {
    const v = raw[key]
    if (v === null || v === undefined) continue
    let text: string
    if (JSON_COLUMNS.has(key)) text = canonicalJson(typeof v === 'string' ? JSON.parse(v) : v)
    else if (INT_COLUMNS.has(key)) text = JSON.stringify(Number(v))
    else text = JSON.stringify(typeof v === 'string' ? v : String(v))
    out += out ? `,${prefix}${text}` : `${prefix}${text}`
  }
  return `{${out}}`
}

function sameKeys(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

/**
 * `storedRowBytes` for rows read as arrays of values in `columns` order (the verifier's read):
 * the column plan is made once per result shape, and no object is built per row.
 */
export function rowEncoder(columns: readonly string[], omit: ReadonlySet<string> = NONE): (values: readonly unknown[]) => string {
  const plan = columns.map((name, index) => ({ name, index })).filter(({ name }) => name !== 'ts' && !omit.has(name))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  const at = plan.map((p) => p.index)
  const prefix = plan.map((p) => `${JSON.stringify(p.name)}:`)
  const kind = plan.map((p) => (JSON_COLUMNS.has(p.name) ? 2 : INT_COLUMNS.has(p.name) ? 1 : 0))
  return (values) => {
    let out = ''
    for (let i = 0; i < at.length; i++) {
      const v = values[at[i]]
      if (v === null || v === undefined) continue
      const k = kind[i]
      const text = k === 2 ? canonicalJson(typeof v === 'string' ? JSON.parse(v) : v) : k === 1 ? JSON.stringify(Number(v)) : quote(typeof v === 'string' ? v : String(v))
      out += out ? `,${prefix[i]}${text}` : `${prefix[i]}${text}`
    }
    return `{${out}}`
  }
}

/** Characters JSON.stringify writes other than as themselves (surrogates: a lone one is escaped). */
const ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/

/** JSON.stringify of a string, without its call where no character needs escaping (most column values). */
function quote(s: string): string {
  return ESCAPED.test(s) ? JSON.stringify(s) : `"${s}"`
}
