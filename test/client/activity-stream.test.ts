import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { ServerResponse } from 'node:http'
import { ApiError, CorralClient, followActivity } from '../../src/client/index.js'
import type { AuditEvent } from '../../src/contract/index.js'
import { envelope, json, type LoopbackApi, startLoopbackApi } from './loopback-api.js'

let api: LoopbackApi
let client: CorralClient

beforeEach(async () => {
  api = await startLoopbackApi()
  client = new CorralClient({ apiUrl: api.url, token: 'crl_tail' })
})
afterEach(() => api.close())

function event(id: string, extra: Partial<AuditEvent> = {}): AuditEvent {
  return { id, org_id: 'org_1', user_id: 'system', timestamp: '2026-01-01T00:00:00Z', event_type: 'api_key_created', category: 'audit', actor: 'control-plane', ...extra }
}

function openStream(res: ServerResponse): void {
  // retry: 10 makes the client's reconnect quick; the real server sends its own value.
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
  res.write('retry: 10\n\n')
}

function send(res: ServerResponse, e: AuditEvent): void {
  res.write(`event: activity\nid: ${e.id}\ndata: ${JSON.stringify(e)}\n\n`)
}

describe(followActivity.name, () => {
  it('delivers events, reconnects with Last-Event-ID after a drop, and stops on abort', async () => {
    const log = ['e1', 'e2', 'e3', 'e4']
    api.route('GET /v1/activity/stream', (req, res) => {
      openStream(res)
      const after = req.headers['last-event-id'] as string | undefined
      const start = after ? log.indexOf(after) + 1 : 0
      // First connection: two events then the server ends the stream (its maximum duration).
      const batch = log.slice(start, start === 0 ? 2 : undefined)
      res.write(': heartbeat\n\n')
      for (const id of batch) send(res, event(id))
      if (start === 0) res.end()
    })
    const seen: string[] = []
    const reconnects: (string | undefined)[] = []
    const stop = new AbortController()
    await followActivity(client, {
      anchor: false,
      signal: stop.signal,
      onReconnecting: (last) => reconnects.push(last),
      onEvent: (e) => {
        seen.push(e.id)
        if (seen.length === 4) stop.abort()
      },
    })
    expect(seen).toEqual(['e1', 'e2', 'e3', 'e4'])
    expect(reconnects).toEqual(['e2'])
    expect(api.requests.map((r) => r.headers['last-event-id'])).toEqual([undefined, 'e2'])
    expect(api.requests.every((r) => r.headers.authorization === 'Bearer crl_tail')).toBe(true)
  })

  it('delivers nothing after the caller stops, even events from the same chunk', async () => {
    api.route('GET /v1/activity/stream', (_req, res) => {
      openStream(res)
      res.write(['a', 'b', 'c'].map((id) => `event: activity\nid: ${id}\ndata: ${JSON.stringify(event(id))}\n\n`).join(''))
    })
    const stop = new AbortController()
    const seen: string[] = []
    await followActivity(client, { anchor: false, signal: stop.signal, onEvent: (e) => (seen.push(e.id), seen.length === 2 && stop.abort()) })
    expect(seen).toEqual(['a', 'b'])
  })

  it('resumes from a given event id on the first connection', async () => {
    api.route('GET /v1/workspaces/ws_9/activity/stream', (req, res) => {
      openStream(res)
      send(res, event('after-' + String(req.headers['last-event-id'])))
    })
    const stop = new AbortController()
    const seen: string[] = []
    await followActivity(client, { workspaceId: 'ws_9', lastEventId: 'e7', signal: stop.signal, onEvent: (e) => (seen.push(e.id), stop.abort()) })
    expect(seen).toEqual(['after-e7'])
  })

  it('anchors at the newest stored event so an early reconnect has something to resume from', async () => {
    api.route('GET /v1/workspaces/ws_2/audit', (req, res) => {
      expect([req.query.get('order'), req.query.get('limit')]).toEqual(['desc', '1'])
      json(res, 200, { events: [event('newest')] })
    })
    api.route('GET /v1/workspaces/ws_2/activity/stream', (req, res) => {
      openStream(res)
      send(res, event('after-' + String(req.headers['last-event-id'])))
    })
    const stop = new AbortController()
    const seen: string[] = []
    await followActivity(client, { workspaceId: 'ws_2', signal: stop.signal, onEvent: (e) => (seen.push(e.id), stop.abort()) })
    expect(seen).toEqual(['after-newest'])
  })

  it('starts live when the credential may not read the audit log (403 on the anchor query)', async () => {
    api.route('GET /v1/audit', (_req, res) => envelope(res, 403, 'permission_denied', 'no audit read'))
    api.route('GET /v1/activity/stream', (req, res) => {
      openStream(res)
      send(res, event('after-' + String(req.headers['last-event-id'])))
    })
    const stop = new AbortController()
    const seen: string[] = []
    await followActivity(client, { signal: stop.signal, onEvent: (e) => (seen.push(e.id), stop.abort()) })
    expect(seen).toEqual(['after-undefined'])
  })

  it('stops with the API error when the server refuses the stream (revoked key)', async () => {
    api.route('GET /v1/activity/stream', (_req, res) => envelope(res, 401, 'unauthenticated', 'the API key was revoked'))
    const error = await followActivity(client, { anchor: false, onEvent: () => {} }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ApiError)
    expect(error).toMatchObject({ status: 401, envelope: { code: 'unauthenticated', request_id: 'req_401' } })
    expect(api.requests).toHaveLength(1)
  })
})
