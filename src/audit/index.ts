// The audit log's public API: the batched writer (every producer's AuditSink), the query and
// stats functions behind the /v1 audit routes, the live bus and the SSE stream. Its vocabulary
// (event types, filter grammar) lives in src/contract/.
export {
  AuditDrainTimeoutError, collectAuditEmits, createAuditWriter, openAuditWriter, stamp,
  type AuditWriter, type AuditWriterLogger, type AuditWriterOptions, type AuditWriterStats,
} from './writer.js'
export { auditedMutation, type RecordAudit } from './mutation.js'
export { flushWithin } from './flush-within.js'
export type { JournalDurability } from './journal.js'
export { journalSettingsFromEnv } from './journal-files.js'
export { AuditUnavailableError, type AuditUnavailableCause } from './unavailable.js'
export { MAX_EVENT_CHARS, MAX_JSON_DEPTH, MAX_TEXT_CHARS, wellFormedJson } from './encode.js'
export { createAuditBus, type AuditBus, type AuditBusFilter, type AuditBusHandler, type AuditBusOptions } from './bus.js'
export {
  queryAudit, parseAuditQuery, DEFAULT_LIMIT, MAX_LIMIT,
  type AuditPage, type AuditQueryInput, type AuditScope, type ParsedAuditQuery,
} from './query.js'
export {
  auditStats, parseStatsQuery, STATS_DIMENSIONS, TIME_BUCKETS, MAX_STATS_ROWS, MAX_TOP,
  type AuditStatsInput, type StatsBucket, type TimeBucket,
} from './stats.js'
export {
  streamActivity, DEFAULT_HEARTBEAT_MS, DEFAULT_MAX_DURATION_MS, RETRY_MS, MAX_PENDING_BYTES, MAX_BUFFERED_EVENTS,
  type StreamActivityOptions,
} from './stream.js'
export { AUDIT_CHANNEL } from './notify.js'
export {
  ProvableLog, LogSigner, WitnessDir, bundleInput, consistencyFor, databaseInput, inclusionFor, logId, logOrigin, rotateLogKey,
  remoteInput, verifyLog, writeBundle,
  type ConsistencyAnswer, type RemoteLog, type Finding, type InclusionAnswer, type TrustOptions, type VerifyReport,
} from './merkle/index.js'
export {
  EXPORT_FORMATS, OCSF_VERSION, csvCell, lineFormat, loadOtlp, toOcsf,
  type ExportFormat, type OtlpEncoding, type OtlpResource,
} from './export/index.js'
export { AuditShipper, AuditSinkConfigError, auditSinksFromEnv, type AuditSinkConfig, type ShipperStats } from './sinks/index.js'
