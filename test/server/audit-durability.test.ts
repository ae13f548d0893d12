// The API's audit guarantees: every audit event a request emitted is durable before its answer
// leaves (awaited by the route or not), and an audit log that cannot take an event answers 503
// with Retry-After in the error envelope instead of hanging (docs/reliability.md).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createAuditWriter, queryAudit, stamp, type AuditWriter } from '../../src/audit/index.js'
import { withInsert } from '../audit/writer-helpers.js'
import { createHarness, type Harness } from './harness.js'

describe('API audit durability', () => {
  let h: Harness
  let original: AuditWriter
  beforeAll(async () => {
    h = await createHarness()
    original = h.deps.audit
  })
  afterAll(async () => {
    h.deps.audit = original
    await h.close()
  })

  /** A writer whose database inserts wait for `open()`. */
  const gatedWriter = (maxQueue = 100) => {
    let open!: () => void
    const gate = new Promise<void>((r) => (open = r))
    const writer = createAuditWriter(withInsert(h.store, async (orig, rows) => (await gate, orig(rows))), { maxQueue })
    return { writer, open }
  }
  /** The same writer as seen by a route that forgets to await emit(). */
  const unawaited = (w: AuditWriter): AuditWriter => ({ ...w, emit: (e) => (void w.emit(e), Promise.resolve(stamp(e))) })

  it('a 2xx leaves only once the events the request emitted are durable, even when the route did not await them', async () => {
    const { ownerToken, orgId } = await h.newOrg()
    const { writer, open } = gatedWriter()
    h.deps.audit = unawaited(writer)
    let answered = false
    const pending = h.inject('POST', '/v1/api-keys', { token: ownerToken, body: { label: 'ci', permission_set: 'read_only' } }).then((r) => ((answered = true), r))
    await new Promise((r) => setTimeout(r, 150))
    expect(answered).toBe(false)
    open()
    const res = await pending
    expect(res.status).toBe(201)
    // At the moment of the answer the row is stored.
    const rows = (await queryAudit(h.store, orgId, { filter: 'event_type=api_key_created' })).events
    expect(rows.map((e) => e.detail?.resource_id)).toEqual([res.body.id])
    await writer.close()
    h.deps.audit = original
  })

  it('a request waits only for its own events, not for another request\'s', async () => {
    const { ownerToken } = await h.newOrg()
    const { writer, open } = gatedWriter()
    h.deps.audit = writer
    let created = false
    const slow = h.inject('POST', '/v1/api-keys', { token: ownerToken, body: { label: 'ci', permission_set: 'read_only' } }).then((r) => ((created = true), r))
    await new Promise((r) => setTimeout(r, 50))
    // A read while the other request's event is not yet durable answers at once.
    expect((await h.inject('GET', '/v1/api-keys', { token: ownerToken })).status).toBe(200)
    expect(created).toBe(false)
    open()
    expect((await slow).status).toBe(201)
    await writer.close()
    h.deps.audit = original
  })

  it('a full audit queue answers 503 service_unavailable with Retry-After, awaited or not', async () => {
    const { ownerToken } = await h.newOrg()
    const { writer, open } = gatedWriter(1)
    void writer.emit(stamp({ org_id: 'org_fill', user_id: 'system', event_type: 'api_key_created', category: 'audit', actor: 'control-plane' }))
    for (const audit of [writer, unawaited(writer)]) {
      h.deps.audit = audit
      const res = await h.inject('POST', '/v1/api-keys', { token: ownerToken, body: { label: 'ci', permission_set: 'read_only' } })
      expect(res.status).toBe(503)
      expect(res.headers['retry-after']).toBe('1')
      expect(res.body.error).toMatchObject({ code: 'service_unavailable', details: { reason: 'audit_unavailable' } })
      expect(res.body.error.request_id).toEqual(expect.any(String))
    }
    open()
    await writer.close()
    h.deps.audit = original
  })

  it('GET /healthz reports the audit writer counters', async () => {
    const res = await h.inject('GET', '/healthz')
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ status: 'ok', audit: { emitted: expect.any(Number), quarantined: 0, pending: expect.any(Number) } })
  })
})
