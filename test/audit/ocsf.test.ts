// Every event type maps to an OCSF 1.3.0 event that validates against the class schema written
// from the OCSF definitions (test/audit/ocsf-schema.ts), with the class docs/audit.md's table names.
import { Ajv } from 'ajv'
import { describe, expect, it } from 'vitest'
import { stamp, toOcsf } from '../../src/audit/index.js'
import { EVENT_TYPES, type EventType, type NewAuditEvent } from '../../src/contract/index.js'
import { decision, mutation } from './fixtures.js'
import { OCSF_EVENT_SCHEMA } from './ocsf-schema.js'

const validate = new Ajv({ allErrors: true, strict: false }).compile(OCSF_EVENT_SCHEMA)

const CLASS_OF: Partial<Record<EventType, number>> = {
  provider_created: 6003, agent_role_deleted: 6003, content_pack_cloned: 6003, credential_status: 6003, secret_created: 6003, workspace_forked: 6003,
  api_key_created: 3001, api_key_revoked: 3001, membership_invited: 3001, membership_removed: 3001,
  proxy_token_minted: 3003, policy_decision: 4002,
  workspace_created: 6002, workspace_stopped: 6002, task_completed: 6002,
  tool_call: 0, agent_thinking: 0, file_change: 0,
}

function eventOf(type: EventType): NewAuditEvent {
  if (type === 'policy_decision') return decision('org_1')
  return { ...mutation('org_1'), event_type: type, workspace_id: 'ws_1', detail: { user_id: 'usr_2', email: 'a@example.com' } }
}

describe('OCSF mapping', () => {
  it('every event type gives an event valid against its OCSF class schema', () => {
    for (const type of EVENT_TYPES) {
      const event = toOcsf(stamp(eventOf(type)))
      const ok = validate(event)
      expect({ type, errors: ok ? null : validate.errors }).toEqual({ type, errors: null })
    }
  })

  it('names the class docs/audit.md lists for each kind of event, with the row id as metadata.uid and the row under unmapped', () => {
    for (const [type, uid] of Object.entries(CLASS_OF)) {
      const row = stamp(eventOf(type as EventType))
      const e = toOcsf(row)
      expect({ type, class_uid: e.class_uid }).toEqual({ type, class_uid: uid })
      expect(e.metadata).toMatchObject({ uid: row.id, tenant_uid: 'org_1', version: '1.3.0' })
      expect(e.unmapped).toEqual(row)
    }
  })

  it('proxy decisions: allow and deny, HTTP methods, DNS', () => {
    const deny = toOcsf(stamp(decision('org_1', { decision: 'deny', reason: 'no_match', method: 'DELETE' })))
    expect(deny).toMatchObject({ class_uid: 4002, activity_id: 2, type_uid: 400202, action_id: 2, disposition_id: 2, status_detail: 'no_match', severity_id: 3 })
    expect(deny.http_request).toEqual({ http_method: 'DELETE', url: { hostname: 'api.example.com', path: '/v1/chat' } })
    const dns = toOcsf(stamp(decision('org_1', { policy_type: 'dns', phase: 'dns', method: undefined, path: undefined })))
    expect(dns).toMatchObject({ class_uid: 4003, activity_id: 1, query: { hostname: 'api.example.com' }, action_id: 1 })
    const odd = toOcsf(stamp(decision('org_1', { method: 'PROPFIND' })))
    expect(odd).toMatchObject({ class_uid: 4002, activity_id: 99, type_uid: 400299, http_request: { url: { hostname: 'api.example.com' } } })
    expect(odd.http_request).not.toHaveProperty('http_method')
    for (const e of [deny, dns, odd]) expect(validate(e)).toBe(true)
  })

  it('the schema is not vacuous: a wrong class uid, a missing required attribute or an unknown attribute fails', () => {
    const good = toOcsf(stamp(mutation('org_1')))
    expect(validate(good)).toBe(true)
    expect(validate({ ...good, type_uid: 300150 })).toBe(false)
    expect(validate({ ...good, class_uid: 3002 })).toBe(false)
    expect(validate({ ...good, user: undefined })).toBe(false)
    expect(validate({ ...good, bogus: 1 })).toBe(false)
    const api = toOcsf(stamp({ ...mutation('org_1'), event_type: 'provider_created' }))
    expect(validate({ ...api, api: undefined })).toBe(false)
  })
})
