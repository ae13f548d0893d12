// A stored audit row as the bytes of its Merkle leaf: the row's values as the store returns them
// (null columns left out, JSON columns parsed, `ts` left out since it is `timestamp` in another
// unit), serialized per RFC 8785 (JSON Canonicalization Scheme): object keys sorted by UTF-16
// code units, no whitespace, numbers and strings as ECMAScript's JSON.stringify writes them. The
// encoding is of values, not of a dialect's column bytes, so SQLite TEXT and PostgreSQL JSONB
// rows give the same leaf (docs/audit.md "The leaf encoding").
import type { AuditEvent } from '../../contract/index.js'
import { hashLeaf, type Hash } from './tree.js'

export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') {
    if (typeof value === 'number' && !Number.isFinite(value)) throw new TypeError('a non-finite number has no JSON form')
    return JSON.stringify(value)
  }
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`
  const obj = value as Record<string, unknown>
  let out = ''
  for (const k of Object.keys(obj).sort()) {
    if (obj[k] === undefined) continue
    out += `${out ? ',' : ''}${JSON.stringify(k)}:${canonicalJson(obj[k])}`
  }
  return `{${out}}`
}

/** The leaf bytes of one stored row (as `store.audit` reads it). */
export function canonicalRow(row: AuditEvent): string {
  return canonicalJson(row)
}

export function rowLeafHash(row: AuditEvent): Hash {
  return hashLeaf(canonicalRow(row))
}
