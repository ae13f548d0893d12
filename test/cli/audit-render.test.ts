import { describe, expect, it } from 'vitest'
import { auditColumns, detailSummary, eventLine, statsColumns } from '../../src/cli/audit-render.js'
import { table } from '../../src/cli/output.js'
import type { AuditEvent } from '../../src/contract/index.js'
import type { StatsBucket } from '../../src/client/types.js'

const deny: AuditEvent = {
  id: '01', org_id: 'o', user_id: 'usr_1', timestamp: '2026-01-01T00:00:00.000Z', event_type: 'policy_decision', category: 'audit',
  actor: 'policy-engine', workspace_id: 'ws_1', decision: 'deny', reason: 'no_match', method: 'POST', destination: 'api.example.com',
  path: '/v1/chat', latency_ms: 3, detail: { allowrule_eval: [{ rule: 'x' }] },
}
const created: AuditEvent = {
  id: '02', org_id: 'o', user_id: 'system', timestamp: '2026-01-01T00:00:01.000Z', event_type: 'api_key_created', category: 'audit',
  actor: 'control-plane', detail: { resource_id: 'key_1', label: 'ci', prefix: 'crl_ab…', permission_set: 'read_only' },
}

describe('audit rendering', () => {
  it('summarises scalar detail keys and cuts long ones', () => {
    expect(detailSummary(created.detail, 100)).toBe('resource_id=key_1 label=ci prefix=crl_ab… permission_set=read_only')
    expect(detailSummary(created.detail)).toBe('resource_id=key_1 label=ci prefix=crl_ab… permission_set=re…')
    expect(detailSummary(deny.detail)).toBe('')
    expect(detailSummary({ text: 'x'.repeat(100) }, 20)).toHaveLength(20)
  })

  it('draws one line per event without colour when NO_COLOR is set', () => {
    process.env.NO_COLOR = '1'
    expect(eventLine(deny)).toBe('2026-01-01T00:00:00.000Z  policy_decision  policy-engine  user=usr_1  ws=ws_1  deny/no_match  POST api.example.com/v1/chat  3ms')
    expect(eventLine(created)).toMatch(/api_key_created  control-plane  user=system  resource_id=key_1 label=ci/)
  })

  it('tables events and stats buckets', () => {
    const text = table([deny, created], auditColumns)
    expect(text.split('\n')[0]).toMatch(/^TIME\s+EVENT_TYPE\s+ACTOR\s+USER\s+WORKSPACE\s+DECISION\s+DESTINATION\s+DETAIL$/)
    const buckets: StatsBucket[] = [{ group: { decision: 'deny', reason: 'no_match' }, value: 2 }, { group: { decision: 'allow' }, value: 5 }]
    expect(statsColumns(buckets).map((c) => c.header)).toEqual(['decision', 'reason', 'value'])
  })
})
