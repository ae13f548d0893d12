// Audit rows as OCSF 1.3.0 events (docs/audit.md "OCSF mapping"). Each event type maps to the class
// that describes it: configuration changes through the API are API Activity, changes to who may act
// (members, API keys) Account Change, a token handed to an operator Authorize Session, the proxy's
// decisions HTTP Activity or DNS Activity, workspace and task lifecycle Application Lifecycle; the
// agent's own narrative events have no OCSF class and are Base Events. Every event carries the row
// id as metadata.uid (a receiver dedupes on it), the org as metadata.tenant_uid, and the whole row
// under `unmapped`, so nothing of the row is lost in the mapping.
import type { AuditEvent, EventType } from '../../contract/index.js'

export const OCSF_VERSION = '1.3.0'

interface OcsfClass { class_uid: number; class_name: string; category_uid: number; category_name: string }
const API_ACTIVITY: OcsfClass = { class_uid: 6003, class_name: 'API Activity', category_uid: 6, category_name: 'Application Activity' }
const APP_LIFECYCLE: OcsfClass = { class_uid: 6002, class_name: 'Application Lifecycle', category_uid: 6, category_name: 'Application Activity' }
const ACCOUNT_CHANGE: OcsfClass = { class_uid: 3001, class_name: 'Account Change', category_uid: 3, category_name: 'Identity & Access Management' }
const AUTHORIZE_SESSION: OcsfClass = { class_uid: 3003, class_name: 'Authorize Session', category_uid: 3, category_name: 'Identity & Access Management' }
const HTTP_ACTIVITY: OcsfClass = { class_uid: 4002, class_name: 'HTTP Activity', category_uid: 4, category_name: 'Network Activity' }
const DNS_ACTIVITY: OcsfClass = { class_uid: 4003, class_name: 'DNS Activity', category_uid: 4, category_name: 'Network Activity' }
const BASE_EVENT: OcsfClass = { class_uid: 0, class_name: 'Base Event', category_uid: 0, category_name: 'Uncategorized' }

/** [activity_id, activity_name] of each class's enum (OCSF 1.3.0 dictionary). */
type Activity = readonly [number, string]
const API = { create: [1, 'Create'], read: [2, 'Read'], update: [3, 'Update'], delete: [4, 'Delete'] } as const satisfies Record<string, Activity>
const ACCOUNT = { create: [1, 'Create'], enable: [2, 'Enable'], delete: [6, 'Delete'], attach: [7, 'Attach Policy'], other: [99, 'Other'] } as const satisfies Record<string, Activity>
const LIFECYCLE = {
  install: [1, 'Install'], remove: [2, 'Remove'], start: [3, 'Start'], stop: [4, 'Stop'], restart: [5, 'Restart'],
  enable: [6, 'Enable'], disable: [7, 'Disable'], other: [99, 'Other'],
} as const satisfies Record<string, Activity>
const HTTP_METHODS: Record<string, Activity> = {
  CONNECT: [1, 'Connect'], DELETE: [2, 'Delete'], GET: [3, 'Get'], HEAD: [4, 'Head'], OPTIONS: [5, 'Options'],
  POST: [6, 'Post'], PUT: [7, 'Put'], TRACE: [8, 'Trace'], PATCH: [9, 'Patch'],
}

/** Which class and activity each event type is; event types not named here are Base Events. */
const MAPPING: Partial<Record<EventType, readonly [OcsfClass, Activity]>> = {
  provider_created: [API_ACTIVITY, API.create], provider_updated: [API_ACTIVITY, API.update], provider_deleted: [API_ACTIVITY, API.delete],
  provider_archived: [API_ACTIVITY, API.update], provider_unarchived: [API_ACTIVITY, API.update],
  agent_role_created: [API_ACTIVITY, API.create], agent_role_updated: [API_ACTIVITY, API.update], agent_role_deleted: [API_ACTIVITY, API.delete],
  agent_role_archived: [API_ACTIVITY, API.update], agent_role_unarchived: [API_ACTIVITY, API.update],
  content_pack_created: [API_ACTIVITY, API.create], content_pack_updated: [API_ACTIVITY, API.update],
  content_pack_deleted: [API_ACTIVITY, API.delete], content_pack_cloned: [API_ACTIVITY, API.create],
  credential_created: [API_ACTIVITY, API.create], credential_deleted: [API_ACTIVITY, API.delete],
  credential_authorized: [API_ACTIVITY, API.update], credential_status: [API_ACTIVITY, API.update],
  secret_created: [API_ACTIVITY, API.create], secret_deleted: [API_ACTIVITY, API.delete],
  workspace_forked: [API_ACTIVITY, API.create], workspace_fork_created: [API_ACTIVITY, API.create],
  api_key_created: [ACCOUNT_CHANGE, ACCOUNT.create], api_key_revoked: [ACCOUNT_CHANGE, ACCOUNT.delete],
  membership_invited: [ACCOUNT_CHANGE, ACCOUNT.create], membership_accepted: [ACCOUNT_CHANGE, ACCOUNT.enable],
  membership_updated: [ACCOUNT_CHANGE, ACCOUNT.attach], membership_removed: [ACCOUNT_CHANGE, ACCOUNT.delete],
  membership_first_seen: [ACCOUNT_CHANGE, ACCOUNT.create],
  proxy_token_minted: [AUTHORIZE_SESSION, [1, 'Assign Privileges']],
  workspace_created: [APP_LIFECYCLE, LIFECYCLE.install], workspace_provisioned: [APP_LIFECYCLE, LIFECYCLE.start],
  workspace_activated: [APP_LIFECYCLE, LIFECYCLE.enable], workspace_deactivated: [APP_LIFECYCLE, LIFECYCLE.disable],
  workspace_evicted: [APP_LIFECYCLE, LIFECYCLE.stop], workspace_restarted: [APP_LIFECYCLE, LIFECYCLE.restart],
  workspace_stopped: [APP_LIFECYCLE, LIFECYCLE.stop], workspace_archived: [APP_LIFECYCLE, LIFECYCLE.remove],
  workspace_unarchived: [APP_LIFECYCLE, LIFECYCLE.install], task_submitted: [APP_LIFECYCLE, LIFECYCLE.other],
  task_completed: [APP_LIFECYCLE, LIFECYCLE.other],
}

const PRODUCT = { name: 'corral', vendor_name: 'corral', feature: { name: 'audit log' } }

function str(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined
}

/** The user an Account Change is about: the detail names it (member, invitee, key), else the acting user. */
function targetUser(e: AuditEvent): Record<string, string> {
  const d = e.detail ?? {}
  const uid = str(d.user_id) ?? str(d.member_user_id) ?? str(d.key_id) ?? str(d.api_key_id) ?? e.user_id
  const email = str(d.email)
  return email ? { uid, email_addr: email } : { uid }
}

/** The proxy's decision: HTTP Activity (or DNS Activity) with the verdict as action and disposition. */
function decisionFields(e: AuditEvent): { cls: OcsfClass; activity: Activity; fields: Record<string, unknown> } {
  const allowed = e.decision !== 'deny'
  const verdict = {
    action_id: allowed ? 1 : 2, action: allowed ? 'Allowed' : 'Denied',
    disposition_id: allowed ? 1 : 2, disposition: allowed ? 'Allowed' : 'Blocked',
    status_id: allowed ? 1 : 2, status: allowed ? 'Success' : 'Failure',
    ...(e.reason ? { status_detail: e.reason } : {}),
  }
  const dst = e.destination ? { dst_endpoint: { hostname: e.destination } } : {}
  if (e.policy_type === 'dns') {
    return { cls: DNS_ACTIVITY, activity: [1, 'Query'], fields: { ...verdict, ...dst, query: { hostname: e.destination ?? '' } } }
  }
  // http_method is one of OCSF's methods; any other method (the row keeps it, under unmapped) is activity Other.
  const method = (e.method ?? '').toUpperCase()
  const known = Object.hasOwn(HTTP_METHODS, method)
  const activity = known ? HTTP_METHODS[method]! : ([99, 'Other'] as const)
  const url = { ...(e.destination ? { hostname: e.destination } : {}), ...(e.path ? { path: e.path } : {}) }
  const http = { http_request: { ...(known ? { http_method: method } : {}), url } }
  const upstream = typeof e.detail?.upstream_status === 'number' ? { http_response: { code: e.detail.upstream_status } } : {}
  return { cls: HTTP_ACTIVITY, activity, fields: { ...verdict, ...dst, ...http, ...upstream } }
}

/** One row as one OCSF event. */
export function toOcsf(e: AuditEvent): Record<string, unknown> {
  let cls: OcsfClass
  let activity: Activity
  let fields: Record<string, unknown> = {}
  const actor = { user: { uid: e.user_id }, ...(e.actor ? { app_name: `corral ${e.actor}` } : {}) }
  if (e.event_type === 'policy_decision') {
    ;({ cls, activity, fields } = decisionFields(e))
  } else {
    ;[cls, activity] = MAPPING[e.event_type] ?? [BASE_EVENT, [99, 'Other']]
    if (cls === API_ACTIVITY) {
      fields = { api: { operation: e.event_type, service: { name: 'corral /v1' } }, src_endpoint: { svc_name: 'corral /v1' }, status_id: 1, status: 'Success' }
    } else if (cls === ACCOUNT_CHANGE) {
      fields = { user: targetUser(e), status_id: 1, status: 'Success' }
    } else if (cls === AUTHORIZE_SESSION) {
      fields = { user: { uid: e.user_id }, status_id: 1, status: 'Success' }
    } else if (cls === APP_LIFECYCLE) {
      fields = { app: { name: 'corral workspace', uid: e.workspace_id ?? e.task_id ?? e.org_id, vendor_name: 'corral' } }
    }
  }
  const [activityId, activityName] = activity
  return {
    class_uid: cls.class_uid, class_name: cls.class_name, category_uid: cls.category_uid, category_name: cls.category_name,
    activity_id: activityId, activity_name: activityName, type_uid: cls.class_uid * 100 + activityId,
    type_name: `${cls.class_name}: ${activityName}`,
    severity_id: e.decision === 'deny' ? 3 : 1, severity: e.decision === 'deny' ? 'Medium' : 'Informational',
    time: Date.parse(e.timestamp),
    message: e.event_type,
    metadata: {
      version: OCSF_VERSION, uid: e.id, original_time: e.timestamp, tenant_uid: e.org_id, event_code: e.event_type,
      log_name: e.category, product: PRODUCT,
    },
    actor,
    ...fields,
    unmapped: e,
  }
}
