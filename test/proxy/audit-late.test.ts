// A forwarded request whose row the audit log could not make durable in time, but keeps and writes
// once it can (AuditUnavailableError 'timeout': the disk or the database away and the journal's
// standby spent): the upstream has answered, so the client gets that answer complete — telling it
// otherwise would have the agent retry a side effect that happened. A row refused outright (queue
// full, writer closed) still cuts the response (test/proxy/audit-fail-closed.test.ts).
import type { IncomingMessage, ServerResponse } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { AuditEvent, NewAuditEvent } from '../../src/contract/index.js'
import { AuditUnavailableError } from '../../src/audit/index.js'
import { RecordingAudit, startHarness, type Harness } from './harness.js'

const CAPS = `
- name: up
  type: http
  allow:
    - domains: ["127.0.0.1"]
      methods: [GET, POST]
`

/** Answers 'timeout' for the rows of paths starting with /late (the event stays queued in the real writer). */
class LateAudit extends RecordingAudit {
  readonly kept: AuditEvent[] = []
  override async emit(event: NewAuditEvent): Promise<AuditEvent> {
    if (event.event_type === 'policy_decision' && event.path?.startsWith('/late')) {
      throw new AuditUnavailableError('timeout', 5, 'the audit log could not make the event durable within 5000 ms')
    }
    return super.emit(event)
  }
}

describe('a forwarded request whose row is late but kept', () => {
  let h: Harness
  let token: string
  const seen: string[] = []
  const quiet = { error: () => {}, warn: () => {} }

  beforeAll(async () => {
    h = await startHarness({ audit: new LateAudit(), logger: quiet })
    ;({ token } = await h.workspace(CAPS))
    h.up.handler.current = (req: IncomingMessage, res: ServerResponse) => {
      seen.push(req.url ?? '')
      req.resume()
      res.writeHead(200, { 'content-type': 'text/plain' })
      res.end(`served ${req.url}`)
    }
  })
  afterAll(async () => {
    await h.close()
  })

  const url = (p: string): string => `https://127.0.0.1:${h.up.httpsPort}${p}`

  it('the client gets the upstream answer complete; the next request waits for the log (gate closed), nothing forwarded', async () => {
    const res = await h.fetch(url('/late-post'), { token, method: 'POST', body: '{"a":1}', headers: { 'content-type': 'application/json' } })
    expect(seen).toContain('/late-post')
    expect(res.status).toBe(200)
    expect(res.body).toBe('served /late-post')
    const next = await h.fetch(url('/after'), { token })
    expect(next.status).toBe(503)
    expect(JSON.parse(next.body).error.reason).toBe('audit_unavailable')
    expect(seen).not.toContain('/after')
  })

  it('a deny whose row is late is still the deny, and nothing is forwarded', async () => {
    const { token: none } = await h.workspace(null)
    const res = await h.fetch(url('/late-deny'), { token: none })
    expect(res.status).toBe(403)
    expect(JSON.parse(res.body).error.reason).toBe('no_policy')
    expect(seen).not.toContain('/late-deny')
  })
})
