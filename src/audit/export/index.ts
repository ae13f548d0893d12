// The audit log's export formats: OTLP logs (the streaming sink's request), OCSF events, CSV and
// JSON lines. Pure functions of a row; where the rows come from (the API's pages, the store's
// export order) is the caller's.
import type { AuditEvent } from '../../contract/index.js'
import { csvHeader, csvLine } from './csv.js'
import { toOcsf } from './ocsf.js'

export { csvCell, csvHeader, csvLine } from './csv.js'
export { OCSF_VERSION, toOcsf } from './ocsf.js'
export type { OtlpEncoding, OtlpResource } from './otlp.js'

/** The OTLP encoder, loaded when a sink first ships: its serializers are large and most processes never ship. */
export const loadOtlp = (): Promise<typeof import('./otlp.js')> => import('./otlp.js')
export { AUDIT_COLUMNS_IN_ORDER } from './columns.js'

export const EXPORT_FORMATS = ['jsonl', 'csv', 'ocsf'] as const
export type ExportFormat = (typeof EXPORT_FORMATS)[number]

/** A format as text pieces: what comes before the first row, and each row's line. */
export function lineFormat(format: ExportFormat): { head: string; line: (e: AuditEvent) => string } {
  if (format === 'csv') return { head: csvHeader(), line: csvLine }
  if (format === 'ocsf') return { head: '', line: (e) => JSON.stringify(toOcsf(e)) + '\n' }
  return { head: '', line: (e) => JSON.stringify(e) + '\n' }
}
