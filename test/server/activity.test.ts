import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createHarness, type Harness } from './harness.js'

/** Reads SSE frames from a fetch body until `count` activity events arrived. */
async function readEvents(res: Response, count: number): Promise<Array<{ id: string; data: any }>> {
  const reader = res.body!.getReader()
  const decoder = new TextDecoder()
  let buf = ''
  const out: Array<{ id: string; data: any }> = []
  while (out.length < count) {
    const { value, done } = await reader.read()
    if (done) break
    buf += decoder.decode(value, { stream: true })
    let i
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const frame = buf.slice(0, i)
      buf = buf.slice(i + 2)
      if (!frame.includes('event: activity')) continue
      const id = /^id: (.+)$/m.exec(frame)![1]
      out.push({ id, data: JSON.parse(/^data: (.+)$/m.exec(frame)![1]) })
    }
  }
  await reader.cancel()
  return out
}

describe('activity stream routes', () => {
  let h: Harness
  let base: string
  beforeAll(async () => {
    h = await createHarness({ config: { rateLimit: false, stream: { heartbeatMs: 60_000 } } })
    await h.app.listen({ port: 0, host: '127.0.0.1' })
    base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`
  })
  afterAll(() => h.close())

  const emit = (orgId: string, user_id = 'system') =>
    h.audit.emit({ org_id: orgId, user_id, event_type: 'task_submitted', category: 'activity', actor: 'control-plane', detail: { description: 'd' } })

  it('streams live events to an EventSource-style client authenticated by ?api_key=, and resumes after Last-Event-ID', async () => {
    const { orgId } = await h.newOrg()
    const k = await h.key(orgId, 'read_only')
    const res = await fetch(`${base}/v1/activity/stream?api_key=${encodeURIComponent(k.value)}`)
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toContain('text/event-stream')
    expect(res.headers.get('x-request-id')).toMatch(/^req_/)
    const first = await emit(orgId)
    const second = await emit(orgId)
    const got = await readEvents(res, 2)
    expect(got.map((e) => e.id)).toEqual([first.id, second.id])
    expect(got[0].data).toMatchObject({ id: first.id, org_id: orgId, event_type: 'task_submitted' })

    const third = await emit(orgId)
    await h.audit.flush()
    const resumed = await fetch(`${base}/v1/activity/stream`, { headers: { authorization: `Bearer ${k.value}`, 'last-event-id': first.id } })
    expect((await readEvents(resumed, 2)).map((e) => e.id)).toEqual([second.id, third.id])
  })

  it('narrows audit:read:own callers to their own events and refuses bad credentials with the envelope', async () => {
    const { orgId } = await h.newOrg()
    const m = await h.member(orgId, 'member')
    const res = await fetch(`${base}/v1/activity/stream?filter=event_type=task_submitted`, { headers: { authorization: `Bearer ${m.token}` } })
    expect(res.status).toBe(200)
    await emit(orgId, 'usr_someone_else')
    const mine = await emit(orgId, m.userId)
    expect((await readEvents(res, 1))[0].id).toBe(mine.id)

    const refused = await fetch(`${base}/v1/activity/stream?api_key=crl_revoked_or_never_was`)
    expect(refused.status).toBe(401)
    expect(((await refused.json()) as any).error.code).toBe('unauthenticated')
    const badResume = await fetch(`${base}/v1/activity/stream`, { headers: { authorization: `Bearer ${m.token}`, 'last-event-id': 'not-a-uuid' } })
    expect(badResume.status).toBe(400)
    expect(((await badResume.json()) as any).error).toMatchObject({ code: 'validation_error', request_id: badResume.headers.get('x-request-id') })
    const ws = await fetch(`${base}/v1/workspaces/ws_nope/activity/stream?api_key=${encodeURIComponent((await h.key(orgId, 'read_only')).value)}`)
    expect(ws.status).toBe(404)
  })

  it('does not accept ?api_key= on ordinary routes', async () => {
    const { orgId } = await h.newOrg()
    const k = await h.key(orgId, 'read_only')
    const res = await fetch(`${base}/v1/audit?api_key=${encodeURIComponent(k.value)}`)
    expect(res.status).toBe(401)
  })
})
