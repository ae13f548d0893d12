// The base error of corral's API surface and the catalogue of every code the /v1 API returns, with
// its HTTP status. Any module may throw a CorralError with a closed-enum `code` and an
// HTTP `status`; routes throw `apiError(code, …)` so a code can never carry the wrong status. The
// server's root error handler (src/server/app.ts) renders it as the spec's envelope (`error.code`,
// `error.message`, `error.request_id`, `error.details`). Branch on `code`, never on message text.
// docs/api.md lists the same table; test/contract/errors-docs.test.ts keeps the two in step.

export class CorralError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status: number,
    readonly details?: Record<string, unknown>,
    options?: { cause?: unknown },
  ) {
    super(message, options)
    this.name = 'CorralError'
  }
}

export const ERROR_CATALOGUE = {
  // 400
  validation_error: { status: 400, summary: 'A field, query parameter or body failed validation; details.fields maps each field to its problem.' },
  invalid_cursor: { status: 400, summary: 'The audit cursor is malformed, was tampered with, or belongs to another query.' },
  invalid_query: { status: 400, summary: 'Unknown filter column or stats dimension, or bad metric/bucket grammar.' },
  oauth_state_invalid: { status: 400, summary: 'OAuth callback whose state is missing, unknown, already used or expired, or whose state cookies do not match it; details.reason says which.' },
  invalid_capabilities: { status: 400, summary: "The role's capability policy does not compile (task create); details carry the issues." },
  // 401
  unauthenticated: { status: 401, summary: 'Missing, malformed, expired, forged or revoked credential.' },
  invalid_signature: { status: 401, summary: 'Identity-provider webhook with a missing, stale or wrong signature, or a replayed id.' },
  // 403
  permission_denied: { status: 403, summary: 'The credential lacks the permission the route requires.' },
  tenant_inactive: { status: 403, summary: 'The org is past_due, decommissioning or trial_expired; writes are refused (details.posture). API key revoke is exempt.' },
  // 404
  not_found: { status: 404, summary: 'No such route, or no such resource in the caller\'s org (cross-org ids included).' },
  workspace_not_found: { status: 404, summary: 'No such workspace in the caller\'s org.' },
  // 405 / 408
  method_not_allowed: { status: 405, summary: 'The path exists but not with this method; the Allow header (and details.allowed) lists the methods it takes.' },
  request_timeout: { status: 408, summary: 'The request line, headers or body did not arrive within the server\'s time limit.' },
  // 409
  conflict: { status: 409, summary: 'The request conflicts with the current state (e.g. the email already has a membership).' },
  last_owner: { status: 409, summary: 'The change would leave the org without an owner.' },
  workspace_archived: { status: 409, summary: 'Follow-up task on an archived workspace.' },
  workspace_not_ready: { status: 409, summary: 'Follow-up task on a workspace that is not ready.' },
  task_already_running: { status: 409, summary: 'A task is already active on the workspace; cancel it first.' },
  role_archived: { status: 409, summary: 'The agent role is archived (task create, fork, role patch).' },
  provider_archived: { status: 409, summary: 'The provider is archived (task create, fork).' },
  invalid_state: { status: 409, summary: 'The workspace is not in a state that allows this (e.g. fork of a busy parent).' },
  workspaces_active: { status: 409, summary: 'Provider archive while workspaces using a dependent role still run.' },
  not_archived: { status: 409, summary: 'Unarchive of something that is not archived.' },
  provider_in_use: { status: 409, summary: 'Provider delete while agent roles (archived ones included) still reference it.' },
  role_in_use: { status: 409, summary: 'Agent role delete while workspaces (any state) still reference it; archive it instead.' },
  pack_in_use: { status: 409, summary: 'Pack delete, a flip to org visibility, or an update that adds an agent, while agent roles still attach it.' },
  pack_not_reuploadable: { status: 409, summary: 'Re-upload of a pack whose origin is not upload (registry or clone).' },
  workspace_already_stopped: { status: 409, summary: 'Stop of a workspace that is already stopped.' },
  // 413 / 415 / 431
  payload_too_large: { status: 413, summary: 'The request body exceeds the size limit.' },
  unsupported_media_type: { status: 415, summary: 'The request body has a content type the route does not accept.' },
  headers_too_large: { status: 431, summary: 'The request line and headers exceed 16 KiB.' },
  // 429
  rate_limited: { status: 429, summary: 'Too many requests for this credential; retry after the Retry-After header (integer seconds).' },
  // 5xx
  internal_error: { status: 500, summary: 'An unexpected server fault; the request id locates it in the logs.' },
  oauth_consent_failed: { status: 502, summary: 'OAuth callback after the provider refused consent, or refused or failed the code exchange; details.reason says which.' },
  registry_unavailable: { status: 502, summary: 'The OCI registry of a pack image is unreachable or failed (5xx) while pulling or pushing it.' },
  service_unavailable: { status: 503, summary: 'A dependency (the store) is unreachable, the audit log is saturated, the server is shutting down, or the feature is not configured; retry after Retry-After.' },
  oauth_unavailable: { status: 503, summary: 'The OAuth subsystem cannot start a consent flow right now.' },
} as const satisfies Record<string, { status: number; summary: string }>

export type ErrorCode = keyof typeof ERROR_CATALOGUE

/** A CorralError whose status comes from the catalogue, so a code can never carry the wrong status. */
export function apiError(code: ErrorCode, message: string, details?: Record<string, unknown>): CorralError {
  return new CorralError(code, message, ERROR_CATALOGUE[code].status, details)
}

export const notFound = (what = 'resource'): CorralError => apiError('not_found', `${what} not found`)

export interface ErrorEnvelope {
  error: { code: string; message: string; request_id: string; details?: Record<string, unknown> }
}

/** The envelope's `error` as a client holds it: no request_id on an error the client raised itself (no answer, a local check). */
export type ErrorBody = Omit<ErrorEnvelope['error'], 'request_id'> & { request_id?: string }

/** JSON schema of the envelope, attached to every route's 4xx/5xx responses. */
export const envelopeSchema = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message', 'request_id'],
      properties: {
        code: { type: 'string' },
        message: { type: 'string' },
        request_id: { type: 'string' },
        details: { type: 'object', additionalProperties: true },
      },
    },
  },
} as const
