// The console's stream reader (src/console/sse.ts: streaming fetch + eventsource-parser, the browser
// cannot send a Bearer header with EventSource) against the real API: when serve ends a stream
// (its maximum duration, here 400 ms), the reader reconnects with Last-Event-ID and the server
// resumes after that event — every event once, in order, including those written while it was
// away; a refused stream ends with the API's envelope.
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Api } from '../../src/console/api.js'
import { follow } from '../../src/console/sse.js'
import { createHarness, type Harness } from '../server/harness.js'

describe('console stream reader (SSE over fetch)', () => {
  let h: Harness
  let base: string
  let ownerKey: string
  let orgId: string
  const emit = async () => (await h.audit.emit({ org_id: orgId, user_id: 'system', event_type: 'task_submitted', category: 'activity', actor: 'control-plane', detail: { description: 'd' } })).id
  beforeAll(async () => {
    h = await createHarness({ config: { stream: { maxDurationMs: 400, heartbeatMs: 100 } } })
    ;({ ownerKey, orgId } = await h.newOrg())
    await h.app.listen({ port: 0, host: '127.0.0.1' })
    base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`
  })
  afterAll(() => h.close())

  it('resumes with Last-Event-ID after serve ends the stream: every event once, in order', async () => {
    const api = new Api(ownerKey, base)
    const seen: string[] = []
    const states: string[] = []
    const ctl = new AbortController()
    const done = follow(api, {
      path: '/activity/stream',
      query: { filter: ['event_type=task_submitted'] },
      signal: ctl.signal,
      onEvent: (e) => seen.push(e.id),
      onState: (s) => states.push(s),
    })
    const created: string[] = []
    const until = async (probe: () => boolean, what: string) => {
      for (let i = 0; i < 100 && !probe(); i++) await new Promise((r) => setTimeout(r, 50))
      expect(probe(), what).toBe(true)
    }
    await until(() => states.includes('live'), 'the stream opened')
    for (let round = 0; round < 3; round++) {
      const reconnects = states.filter((s) => s === 'reconnecting').length
      for (let i = 0; i < 2; i++) created.push(await emit())
      // Wait for serve to end this connection (400 ms), so the next keys are written across a reconnect.
      await until(() => states.filter((s) => s === 'reconnecting').length > reconnects, `reconnect ${round}`)
    }
    await h.audit.flush()
    const stored = (await h.inject('GET', '/v1/audit?filter=event_type=task_submitted&order=asc&limit=100', { token: ownerKey })).body.events.map((e: { id: string }) => e.id)
    expect(stored).toEqual(created)
    await until(() => seen.length >= stored.length, 'every event arrived')
    ctl.abort()
    await done
    expect(seen).toEqual(stored)
    expect(states.at(-1)).toBe('ended')
  })

  it('anchored on the newest stored event, a stream that ends before its first event loses none written while it reconnects', async () => {
    const api = new Api(ownerKey, base)
    await emit()
    await h.audit.flush()
    const seen: string[] = []
    const states: string[] = []
    const ctl = new AbortController()
    const done = follow(api, { path: '/activity/stream', anchorPath: '/audit', signal: ctl.signal, onEvent: (e) => seen.push(e.id), onState: (s) => states.push(s) })
    const until = async (probe: () => boolean, what: string) => {
      for (let i = 0; i < 100 && !probe(); i++) await new Promise((r) => setTimeout(r, 20))
      expect(probe(), what).toBe(true)
    }
    // The first connection ends (400 ms) with no event; the next one is written in the back-off gap.
    await until(() => states.includes('reconnecting'), 'the first stream ended')
    const written = await emit()
    await until(() => seen.includes(written), 'the event written between two connections arrived')
    ctl.abort()
    await done
    expect(seen).toEqual([written])
  })

  it('a refused stream ends at once with the API envelope', async () => {
    const failures: string[] = []
    await follow(new Api('crl_not_a_key', base), {
      path: '/activity/stream',
      signal: new AbortController().signal,
      onEvent: () => {},
      onState: (s, failure) => failure && failures.push(`${s} ${failure.status} ${failure.code}`),
    })
    expect(failures).toEqual(['ended 401 unauthenticated'])
  })
})
