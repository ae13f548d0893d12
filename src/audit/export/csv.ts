// Audit rows as CSV (RFC 4180), one header line of the spec's columns then one line per row. A
// spreadsheet runs a cell that starts with = + - @ (or a tab / carriage return before one of them)
// as a formula, so such a cell is written with a leading apostrophe: what the OWASP "CSV injection"
// guidance and the spreadsheets themselves take as "this is text". The apostrophe is the one change
// to a value; JSON columns are written as their JSON text.
import { AUDIT_COLUMNS_IN_ORDER, type AuditEvent } from './columns.js'

const FORMULA_START = /^[=+\-@\t\r]/

export function csvCell(v: unknown): string {
  if (v === undefined || v === null) return ''
  if (typeof v === 'number' || typeof v === 'boolean') return String(v)
  let s = typeof v === 'string' ? v : JSON.stringify(v)
  if (typeof v === 'string' && FORMULA_START.test(s)) s = `'${s}`
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s
}

export function csvHeader(): string {
  return AUDIT_COLUMNS_IN_ORDER.join(',') + '\r\n'
}

export function csvLine(e: AuditEvent): string {
  const row = e as unknown as Record<string, unknown>
  return AUDIT_COLUMNS_IN_ORDER.map((c) => csvCell(row[c])).join(',') + '\r\n'
}
