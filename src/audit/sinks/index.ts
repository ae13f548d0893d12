// Shipping the audit log to outside receivers: an OpenTelemetry collector (OTLP/HTTP logs) and an
// HTTP endpoint taking OCSF events, each with a durable cursor and a cross-replica lease.
export { AuditSinkConfigError, auditSinksFromEnv, parseHeaders, type AuditSinkConfig, type SinkKind } from './config.js'
export { AuditShipper, type ShipperOptions, type ShipperStats } from './shipper.js'
