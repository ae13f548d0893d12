// The audit rows as an OTLP logs export request (docs/audit.md "OTLP streaming"), encoded by
// @opentelemetry/otlp-transformer's serializers (protobuf or the JSON mapping). The serializers take
// the SDK's ReadableLogRecord; a stored row is not something the SDK's logger emitted, so the
// records are built here with exactly the fields the serializers read. One resource per org in a
// request: service.name=corral, service.instance.id (this replica), corral.org_id and
// corral.audit.scope (org | platform), and deployment.environment.name when configured.
import { JsonLogsSerializer, ProtobufLogsSerializer, type IExportLogsServiceResponse } from '@opentelemetry/otlp-transformer'
import { PLATFORM_ORG, type AuditEvent } from '../../contract/index.js'

export type OtlpEncoding = 'protobuf' | 'json'
type LogRecords = Parameters<typeof ProtobufLogsSerializer.serializeRequest>[0]

/** The resource attributes every request carries besides the org's. */
export interface OtlpResource {
  /** service.instance.id: the replica that shipped the rows. */
  instanceId: string
  /** deployment.environment.name, when the operator named one. */
  deployment?: string
  /** service.version. */
  version?: string
}

/** OTLP severity numbers (logs data model): INFO for every row, WARN for a denial. */
const SEVERITY_INFO = 9
const SEVERITY_WARN = 13
const SCALARS = [
  'org_id', 'user_id', 'event_type', 'category', 'actor', 'workspace_id', 'task_id', 'agent_role', 'agent_provider', 'destination',
  'method', 'path', 'decision', 'reason', 'latency_ms', 'transforms_applied', 'validations_applied', 'policy_type', 'phase', 'capability_name',
] as const satisfies ReadonlyArray<keyof AuditEvent>

/** The attributes of one row's LogRecord: its id and every populated scalar column, under `corral.audit.`. */
export function otlpAttributes(e: AuditEvent): Record<string, string | number> {
  const out: Record<string, string | number> = { 'corral.audit.event_id': e.id }
  for (const c of SCALARS) {
    const v = e[c]
    if (v !== undefined) out[`corral.audit.${c}`] = v
  }
  return out
}

function hrTime(iso: string): [number, number] {
  const ms = Date.parse(iso)
  return [Math.floor(ms / 1000), (ms % 1000) * 1_000_000]
}

function resourceOf(orgId: string, r: OtlpResource) {
  const attributes: Record<string, string> = {
    'service.name': 'corral', 'service.instance.id': r.instanceId, 'corral.org_id': orgId,
    'corral.audit.scope': orgId === PLATFORM_ORG ? 'platform' : 'org',
  }
  if (r.version) attributes['service.version'] = r.version
  if (r.deployment) attributes['deployment.environment.name'] = r.deployment
  return { attributes, schemaUrl: undefined }
}

/** The records of one request; the body is the whole row (a map), so nothing of it is lost. */
export function otlpLogRecords(events: readonly AuditEvent[], r: OtlpResource, observedAt = Date.now()): LogRecords {
  const resources = new Map<string, ReturnType<typeof resourceOf>>()
  const scope = { name: 'corral.audit', version: r.version }
  const observed = hrTime(new Date(observedAt).toISOString())
  return events.map((e) => {
    let resource = resources.get(e.org_id)
    if (!resource) resources.set(e.org_id, (resource = resourceOf(e.org_id, r)))
    const deny = e.decision === 'deny'
    return {
      hrTime: hrTime(e.timestamp), hrTimeObserved: observed,
      severityNumber: deny ? SEVERITY_WARN : SEVERITY_INFO, severityText: deny ? 'WARN' : 'INFO',
      eventName: `corral.audit.${e.event_type}`,
      body: e as unknown as Record<string, unknown>, attributes: otlpAttributes(e), droppedAttributesCount: 0,
      resource, instrumentationScope: scope,
    }
  }) as unknown as LogRecords
}

/** The request body and its content type. */
export function encodeOtlpLogs(events: readonly AuditEvent[], r: OtlpResource, encoding: OtlpEncoding): { body: Uint8Array; contentType: string } {
  const records = otlpLogRecords(events, r)
  const serializer = encoding === 'json' ? JsonLogsSerializer : ProtobufLogsSerializer
  const body = serializer.serializeRequest(records)
  if (!body) throw new Error('the OTLP serializer produced no request')
  return { body, contentType: encoding === 'json' ? 'application/json' : 'application/x-protobuf' }
}

/** The receiver's ExportLogsServiceResponse (empty body: a full success). Throws on bytes that are not one. */
export function decodeOtlpResponse(body: Uint8Array, encoding: OtlpEncoding): IExportLogsServiceResponse {
  if (body.length === 0) return {}
  return (encoding === 'json' ? JsonLogsSerializer : ProtobufLogsSerializer).deserializeResponse(body)
}
