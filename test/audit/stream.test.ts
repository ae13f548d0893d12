import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createAuditBus, createAuditWriter, streamActivity, type AuditBus, type AuditWriter, type StreamActivityOptions } from '../../src/audit/index.js'
import { type AuditEvent, CorralError } from '../../src/contract/index.js'
import type { Store } from '../../src/store/index.js'
import { testDialects } from '../helpers/dialects.js'
import { decision, mutation, orgId } from './fixtures.js'

interface Frame {
  event?: string
  id?: string
  data?: string
  comment?: string
  retry?: string
}

/** A minimal SSE reader over node:http, so the test sees the raw frames. */
function connect(url: string, headers: Record<string, string> = {}) {
  const frames: Frame[] = []
  let status = 0
  let resHeaders: http.IncomingHttpHeaders = {}
  let ended = false
  let body = ''
  const req = http.get(url, { headers }, (res) => {
    status = res.statusCode ?? 0
    resHeaders = res.headers
    res.setEncoding('utf8')
    let buf = ''
    res.on('data', (chunk: string) => {
      body += chunk
      buf += chunk
      let i: number
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, i)
        buf = buf.slice(i + 2)
        const f: Frame = {}
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) f.comment = line.slice(1).trim()
          else {
            const [k, ...v] = line.split(': ')
            ;(f as Record<string, string>)[k] = v.join(': ')
          }
        }
        frames.push(f)
      }
    })
    res.on('end', () => (ended = true))
    res.on('close', () => (ended = true))
  })
  req.on('error', () => (ended = true))
  return {
    req,
    frames,
    events: () => frames.filter((f) => f.event === 'activity').map((f) => JSON.parse(f.data!) as AuditEvent),
    ids: () => frames.filter((f) => f.event === 'activity').map((f) => f.id!),
    status: () => status,
    headers: () => resHeaders,
    ended: () => ended,
    body: () => body,
    close: () => req.destroy(),
  }
}

for (const d of testDialects()) {
  describe(`activity stream [${d.name}]`, () => {
    let store: Store
    let bus: AuditBus
    let writer: AuditWriter
    let server: http.Server
    let base: string
    let streams: Array<Promise<void>> = []
    /** Per-path stream options, so each test picks its own org, scope and timers. */
    const routes = new Map<string, Partial<StreamActivityOptions> & { orgId: string }>()

    beforeAll(async () => {
      store = await d.open()
      bus = createAuditBus(store)
      writer = createAuditWriter(store, { flushIntervalMs: 1 })
      server = http.createServer((req, res) => {
        const url = new URL(req.url!, 'http://x')
        const route = routes.get(url.pathname)
        if (!route) return void res.writeHead(404).end()
        const done = streamActivity({
          store, bus, request: req, reply: res,
          lastEventId: (req.headers['last-event-id'] as string | undefined) ?? url.searchParams.get('lastEventId') ?? undefined,
          filter: url.searchParams.getAll('filter'),
          ...route,
        }).catch((err: unknown) => {
          const e = err as CorralError
          res.writeHead(e.status ?? 500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: e.code, message: e.message } }))
        })
        streams.push(done)
      })
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    })
    afterAll(async () => {
      server.closeAllConnections()
      await new Promise((r) => server.close(r))
      await Promise.all(streams)
      await writer.close()
      await bus.close()
      await store.close()
    })

    const route = (opts: Partial<StreamActivityOptions> & { orgId: string }) => {
      const path = `/s/${Math.random().toString(36).slice(2)}`
      routes.set(path, opts)
      return `${base}${path}`
    }
    const emitN = async (n: number, make: (i: number) => Parameters<AuditWriter['emit']>[0]) => {
      const out: AuditEvent[] = []
      for (let i = 0; i < n; i++) out.push(await writer.emit(make(i)))
      await writer.flush()
      return out
    }

    it('opens with SSE headers and retry, then delivers live events as activity frames', async () => {
      const org = orgId()
      // Committed before connecting: not replayed without Last-Event-ID (though a notification still
      // in flight may deliver one of them live).
      const pre = await emitN(3, () => mutation(org))
      const c = connect(route({ orgId: org }))
      await expect.poll(() => c.frames.some((f) => f.retry)).toBe(true)
      expect(c.status()).toBe(200)
      expect(c.headers()['content-type']).toBe('text/event-stream; charset=utf-8')
      expect(c.headers()['cache-control']).toBe('no-cache, no-transform')
      expect(c.headers()['x-accel-buffering']).toBe('no')
      expect(c.frames[0].retry).toBe('2000')
      const live = await emitN(4, (i) => decision(org, { latency_ms: i }))
      const liveIds = live.map((e) => e.id)
      await expect.poll(() => c.ids().filter((id) => liveIds.includes(id))).toEqual(liveIds)
      const preIds = new Set(pre.map((e) => e.id))
      expect(c.ids().filter((id) => !preIds.has(id))).toEqual(liveIds)
      expect(new Set(c.ids()).size).toBe(c.ids().length)
      expect(c.events().find((e) => e.id === live[2].id)).toEqual(live[2])
      expect(c.body()).toContain(`event: activity\nid: ${live[0].id}\ndata: {`)
      c.close()
    })

    it('resumes after Last-Event-ID with no gap and no duplicate while events keep coming', async () => {
      const org = orgId()
      const before = await emitN(30, (i) => decision(org, { latency_ms: i }))
      const url = route({ orgId: org })
      // Keep writing while the client reconnects: the replay/live hand-over must not lose or repeat.
      let writing = true
      const during: AuditEvent[] = []
      const producer = (async () => {
        while (writing) {
          during.push(await writer.emit(mutation(org)))
          await new Promise((r) => setTimeout(r, 1))
        }
        await writer.flush()
      })()
      const c = connect(url, { 'Last-Event-ID': before[9].id })
      await expect.poll(() => c.ids().length).toBeGreaterThan(25)
      await new Promise((r) => setTimeout(r, 30))
      writing = false
      await producer
      const expected = [...before.slice(10), ...during].map((e) => e.id)
      await expect.poll(() => c.ids().length).toBe(expected.length)
      expect(new Set(c.ids()).size).toBe(c.ids().length)
      expect(c.ids()).toEqual(expected)
      c.close()
    })

    it('replays more than a page and more than the slow-client limit to a reading client', async () => {
      const org = orgId()
      const blob = 'y'.repeat(4096)
      const first = await emitN(1, () => mutation(org))
      const rest = await emitN(700, (i) => mutation(org, { detail: { resource_id: `r${i}`, blob } }))
      const c = connect(route({ orgId: org }), { 'Last-Event-ID': first[0].id })
      await expect.poll(() => c.ids().length, { timeout: 15_000 }).toBe(700)
      expect(c.ids()).toEqual(rest.map((e) => e.id))
      expect(c.ended()).toBe(false)
      c.close()
    })

    it('Last-Event-ID from the query, an unknown id resumes from the time it encodes', async () => {
      const org = orgId()
      const events = await emitN(5, () => mutation(org))
      // The id of an event this org does not have, minted after events[2]: replay starts after that instant.
      const foreign = (await emitN(1, () => mutation(orgId())))[0]
      const later = await emitN(2, () => mutation(org))
      const c = connect(`${route({ orgId: org })}?lastEventId=${events[2].id}`)
      await expect.poll(() => c.ids()).toEqual([...events.slice(3), ...later].map((e) => e.id))
      c.close()
      const c2 = connect(route({ orgId: org }), { 'Last-Event-ID': foreign.id })
      await expect.poll(() => c2.ids()).toEqual(later.map((e) => e.id))
      c2.close()
    })

    it('scopes by workspace, user and filter, in replay and live', async () => {
      const org = orgId()
      const first = await emitN(1, () => mutation(org))
      const mk = (i: number) => decision(org, { workspace_id: i % 2 ? 'ws_a' : 'ws_b', user_id: i % 3 ? 'usr_x' : 'usr_y', decision: i % 4 ? 'allow' : 'deny' })
      const replayed = await emitN(12, mk)
      const ws = connect(route({ orgId: org, workspaceId: 'ws_a' }), { 'Last-Event-ID': first[0].id })
      const own = connect(route({ orgId: org, userId: 'usr_y' }), { 'Last-Event-ID': first[0].id })
      const denies = connect(`${route({ orgId: org })}?filter=decision%3Ddeny`, { 'Last-Event-ID': first[0].id })
      await expect.poll(() => ws.ids().length).toBe(6)
      const live = await emitN(12, mk)
      const all = [...replayed, ...live]
      await expect.poll(() => ws.ids()).toEqual(all.filter((e) => e.workspace_id === 'ws_a').map((e) => e.id))
      await expect.poll(() => own.ids()).toEqual(all.filter((e) => e.user_id === 'usr_y').map((e) => e.id))
      await expect.poll(() => denies.ids()).toEqual(all.filter((e) => e.decision === 'deny').map((e) => e.id))
      for (const c of [ws, own, denies]) c.close()
    })

    it('sends heartbeats and ends at the maximum duration', async () => {
      const c = connect(route({ orgId: orgId(), heartbeatMs: 10, maxDurationMs: 150 }))
      await expect.poll(() => c.frames.filter((f) => f.comment === 'heartbeat').length).toBeGreaterThan(1)
      await expect.poll(() => c.ended(), { timeout: 5_000 }).toBe(true)
    })

    it('refuses a malformed Last-Event-ID or filter before streaming', async () => {
      const url = route({ orgId: orgId() })
      const bad = connect(url, { 'Last-Event-ID': 'not-an-id' })
      await expect.poll(() => bad.ended()).toBe(true)
      expect(bad.status()).toBe(400)
      expect(JSON.parse(bad.body()).error.code).toBe('validation_error')
      const badFilter = connect(`${url}?filter=secret%3D1`)
      await expect.poll(() => badFilter.ended()).toBe(true)
      expect(badFilter.status()).toBe(400)
      expect(JSON.parse(badFilter.body()).error.code).toBe('invalid_query')
    })

    it('leaves the response to the caller when it fails before streaming', async () => {
      const failing = Promise.reject(new CorralError('store_unavailable', 'listen failed', 503))
      failing.catch(() => {})
      let unsubscribed = false
      const brokenBus: AuditBus = { ready: failing, subscribe: () => () => void (unsubscribed = true), close: async () => {} }
      const c = connect(route({ orgId: orgId(), bus: brokenBus }))
      await expect.poll(() => c.ended()).toBe(true)
      expect(c.status()).toBe(503)
      expect(JSON.parse(c.body()).error.code).toBe('store_unavailable')
      expect(unsubscribed).toBe(true)
    })

    it('stops and unsubscribes when the client goes away', async () => {
      const org = orgId()
      const before = streams.length
      const c = connect(route({ orgId: org }))
      await expect.poll(() => c.frames.length).toBeGreaterThan(0)
      const done = streams[before]
      c.close()
      await expect(done).resolves.toBeUndefined()
    })

    it('cuts a client that stops reading instead of buffering without bound', async () => {
      const org = orgId()
      const before = streams.length
      const c = connect(route({ orgId: org, heartbeatMs: 60_000 }))
      await expect.poll(() => c.frames.length).toBeGreaterThan(0)
      const done = streams[before]
      c.req.on('response', () => {})
      // Stop reading: pause the response socket so the server's writes pile up.
      c.req.socket?.pause()
      let finished = false
      void done.then(() => (finished = true))
      const blob = 'x'.repeat(32 * 1024)
      for (let i = 0; i < 400 && !finished; i++) {
        await writer.emit(mutation(org, { detail: { resource_id: 'r', blob } }))
        if (i % 20 === 19) await writer.flush()
      }
      await writer.flush()
      await expect.poll(() => finished, { timeout: 10_000 }).toBe(true)
      c.close()
    })
  })
}
