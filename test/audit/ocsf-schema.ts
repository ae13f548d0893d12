// JSON Schemas (ajv) of the OCSF 1.3.0 classes corral emits, written from the OCSF class and object
// definitions (schema.ocsf.io, v1.3.0) for the attributes corral fills: each class's required
// attributes, the enums' ids and names it uses, and the object shapes. `additionalProperties` is
// false at the top level so an attribute the class does not define fails validation.
const int = { type: 'integer' }
const str = { type: 'string', minLength: 1 }
const user = { type: 'object', properties: { uid: str, email_addr: str, name: str }, anyOf: [{ required: ['uid'] }, { required: ['name'] }], additionalProperties: false }
const actor = { type: 'object', properties: { user, app_name: str }, additionalProperties: false }
const product = { type: 'object', required: ['name', 'vendor_name'], properties: { name: str, vendor_name: str, feature: { type: 'object', properties: { name: str } } } }
const metadata = {
  type: 'object', required: ['version', 'product'],
  properties: { version: { const: '1.3.0' }, uid: str, original_time: str, tenant_uid: str, event_code: str, log_name: str, product },
  additionalProperties: false,
}
const endpoint = { type: 'object', minProperties: 1, properties: { hostname: str, svc_name: str, ip: str, name: str }, additionalProperties: false }
const status = { status_id: { enum: [0, 1, 2, 99] }, status: str, status_detail: str }
const verdict = { action_id: { enum: [1, 2] }, action: { enum: ['Allowed', 'Denied'] }, disposition_id: { enum: [1, 2] }, disposition: { enum: ['Allowed', 'Blocked'] } }

/** The base event's attributes (every class): required ones and the ones corral sets. */
const base = {
  class_uid: int, class_name: str, category_uid: int, category_name: str, activity_id: int, activity_name: str,
  type_uid: int, type_name: str, severity_id: { enum: [0, 1, 2, 3, 4, 5, 6, 99] }, severity: str, time: int, message: str,
  metadata, actor, unmapped: { type: 'object' },
}
const baseRequired = ['class_uid', 'category_uid', 'activity_id', 'type_uid', 'severity_id', 'time', 'metadata']

function cls(classUid: number, categoryUid: number, activities: number[], required: string[], properties: Record<string, unknown>) {
  return {
    type: 'object',
    required: [...baseRequired, ...required],
    properties: {
      ...base, ...properties,
      class_uid: { const: classUid }, category_uid: { const: categoryUid }, activity_id: { enum: activities },
      type_uid: { enum: activities.map((a) => classUid * 100 + a) },
    },
    additionalProperties: false,
  }
}

export const OCSF_CLASSES = {
  0: cls(0, 0, [0, 99], [], {}),
  3001: cls(3001, 3, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 99], ['user'], { user, ...status }),
  3003: cls(3003, 3, [0, 1, 2, 99], ['user'], { user, ...status }),
  4002: cls(4002, 4, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 99], [], {
    ...status, ...verdict, dst_endpoint: endpoint,
    http_request: { type: 'object', properties: { http_method: { enum: ['CONNECT', 'DELETE', 'GET', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'TRACE', 'PATCH'] }, url: { type: 'object', properties: { hostname: str, path: str }, additionalProperties: false } }, additionalProperties: false },
    http_response: { type: 'object', required: ['code'], properties: { code: int } },
  }),
  4003: cls(4003, 4, [0, 1, 2, 6, 99], [], { ...status, ...verdict, dst_endpoint: endpoint, query: { type: 'object', required: ['hostname'], properties: { hostname: { type: 'string' } } } }),
  6002: cls(6002, 6, [0, 1, 2, 3, 4, 5, 6, 7, 8, 99], ['app'], { app: { type: 'object', anyOf: [{ required: ['name'] }, { required: ['uid'] }], properties: { name: str, uid: str, vendor_name: str }, additionalProperties: false } }),
  6003: cls(6003, 6, [0, 1, 2, 3, 4, 99], ['actor', 'api', 'src_endpoint'], {
    ...status,
    api: { type: 'object', required: ['operation'], properties: { operation: str, service: { type: 'object', properties: { name: str } } }, additionalProperties: false },
    src_endpoint: endpoint,
  }),
} as const

/** One schema that picks the class's schema by class_uid. */
export const OCSF_EVENT_SCHEMA = {
  type: 'object', required: ['class_uid'],
  oneOf: Object.values(OCSF_CLASSES),
}
