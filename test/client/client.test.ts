import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { ApiConnectionError, ApiError, CorralClient, normalizeApiUrl } from '../../src/client/index.js'
import { envelope, json, type LoopbackApi, startLoopbackApi } from './loopback-api.js'

let api: LoopbackApi
let client: CorralClient

beforeEach(async () => {
  api = await startLoopbackApi()
  client = new CorralClient({ apiUrl: api.url, token: 'crl_secret_token' })
})
afterEach(() => api.close())

describe(CorralClient.name, () => {
  it('sends the Bearer token and JSON body, and returns the created key', async () => {
    api.route('POST /v1/api-keys', (req, res) =>
      json(res, 201, { id: 'key_1', label: (req.body as { label: string }).label, prefix: 'crl_ab…', permission_set: 'read_only', created_at: '2026-01-01T00:00:00Z', value: 'crl_full' }),
    )
    const key = await client.createApiKey({ label: 'ci', permission_set: 'read_only' })
    expect(key).toMatchObject({ id: 'key_1', label: 'ci', value: 'crl_full' })
    const [req] = api.requests
    expect(req.headers.authorization).toBe('Bearer crl_secret_token')
    expect(req.headers['content-type']).toBe('application/json')
    expect(req.body).toEqual({ label: 'ci', permission_set: 'read_only' })
  })

  it('turns an error envelope into an ApiError that keeps code, status and request id', async () => {
    api.route('DELETE /v1/api-keys/key_x', (_req, res) => envelope(res, 404, 'not_found', 'no such API key'))
    const error = await client.revokeApiKey('key_x').catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ApiError)
    expect(error).toMatchObject({ status: 404, envelope: { code: 'not_found', message: 'no such API key', request_id: 'req_404' } })
  })

  it('synthesises an envelope for a non-JSON error page, keeping the request id header', async () => {
    api.route('GET /v1/api-keys', (_req, res) => {
      res.writeHead(502, { 'content-type': 'text/html', 'x-request-id': 'req_gw' })
      res.end('<html>bad gateway</html>')
    })
    const error = (await client.listApiKeys().catch((e: unknown) => e)) as ApiError
    expect(error.status).toBe(502)
    expect(error.envelope.code).toBe('http_502')
    expect(error.envelope.request_id).toBe('req_gw')
    expect(error.message).toContain('/v1/api-keys')
  })

  it('encodes repeatable filters and drops unset query parameters', async () => {
    api.route('GET /v1/audit', (_req, res) => json(res, 200, { events: [] }))
    await client.queryAudit({ filter: ['decision=deny', 'event_type=policy_decision,api_key_created'], order: 'asc', limit: 5 })
    const q = api.requests[0].query
    expect(q.getAll('filter')).toEqual(['decision=deny', 'event_type=policy_decision,api_key_created'])
    expect(q.get('order')).toBe('asc')
    expect(q.get('limit')).toBe('5')
    expect(q.has('cursor')).toBe(false)
    expect(q.has('from')).toBe(false)
  })

  it('routes workspace-scoped audit and stats under /v1/workspaces/{id}', async () => {
    api.route('GET /v1/workspaces/ws_1/audit', (_req, res) => json(res, 200, { events: [] }))
    api.route('GET /v1/workspaces/ws_1/audit/stats', (_req, res) => json(res, 200, { buckets: [{ group: { decision: 'deny' }, value: 3 }] }))
    await client.queryAudit({}, { workspaceId: 'ws_1' })
    const stats = await client.auditStats({ group_by: 'decision', time_bucket: '1h' }, { workspaceId: 'ws_1' })
    expect(stats.buckets[0].value).toBe(3)
    expect(api.requests[1].query.get('group_by')).toBe('decision')
    expect(api.requests[1].query.get('time_bucket')).toBe('1h')
  })

  it('follows cursors until a page comes back without one', async () => {
    api.route('GET /v1/audit', (req, res) => {
      const cursor = req.query.get('cursor')
      if (!cursor) return json(res, 200, { events: [{ id: 'a' }, { id: 'b' }], cursor: 'c1' })
      if (cursor === 'c1') return json(res, 200, { events: [{ id: 'c' }, { id: 'd' }], cursor: 'c2' })
      return json(res, 200, { events: [{ id: 'e' }] })
    })
    const ids: string[] = []
    for await (const page of client.auditPages({ limit: 2, filter: ['category=audit'] })) ids.push(...page.events.map((e) => e.id))
    expect(ids).toEqual(['a', 'b', 'c', 'd', 'e'])
    expect(api.requests.map((r) => r.query.get('cursor'))).toEqual([null, 'c1', 'c2'])
    // The query stays the same across pages: the server ties a cursor to its query.
    expect(api.requests.every((r) => r.query.get('filter') === 'category=audit' && r.query.get('limit') === '2')).toBe(true)
  })

  it('retries an idempotent GET once after Retry-After on 429', async () => {
    let calls = 0
    api.route('GET /v1/api-keys', (_req, res) => {
      calls += 1
      if (calls === 1) return envelope(res, 429, 'rate_limited', 'slow down', { 'retry-after': '0' })
      json(res, 200, { api_keys: [] })
    })
    await expect(client.listApiKeys()).resolves.toEqual([])
    expect(calls).toBe(2)
  })

  it('does not retry a write on 429, and gives up after one retry of a read', async () => {
    api.route('POST /v1/api-keys', (_req, res) => envelope(res, 429, 'rate_limited', 'slow down', { 'retry-after': '0' }))
    api.route('GET /v1/api-keys', (_req, res) => envelope(res, 429, 'rate_limited', 'slow down', { 'retry-after': '0' }))
    await expect(client.createApiKey({ label: 'x', permission_set: 'read_only' })).rejects.toMatchObject({ status: 429, retryAfter: 0 })
    await expect(client.listApiKeys()).rejects.toMatchObject({ status: 429 })
    expect(api.requests.map((r) => r.method)).toEqual(['POST', 'GET', 'GET'])
  })

  it('does not wait longer than maxRetryAfter', async () => {
    const impatient = new CorralClient({ apiUrl: api.url, token: 't', maxRetryAfter: 5 })
    api.route('GET /v1/api-keys', (_req, res) => envelope(res, 429, 'rate_limited', 'slow down', { 'retry-after': '3600' }))
    await expect(impatient.listApiKeys()).rejects.toMatchObject({ status: 429, retryAfter: 3600 })
    expect(api.requests).toHaveLength(1)
  })

  it('reports an unreachable API as a connection error naming the URL', async () => {
    await api.close()
    const error = await client.listApiKeys().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ApiConnectionError)
    expect((error as Error).message).toMatch(new RegExp(`cannot reach the corral API at ${api.url}: ECONNREFUSED`))
  })

  it('calls the membership routes with encoded ids', async () => {
    api.route('GET /v1/orgs/org_1/memberships', (_req, res) => json(res, 200, { memberships: [{ user_id: 'usr_1', email: 'a@x', role: 'owner' }] }))
    api.route('POST /v1/orgs/org_1/memberships', (req, res) => json(res, 201, { user_id: 'usr_2', ...(req.body as object), status: 'pending' }))
    api.route('PATCH /v1/orgs/org_1/memberships/usr_2', (req, res) => json(res, 200, { user_id: 'usr_2', ...(req.body as object) }))
    api.route('DELETE /v1/orgs/org_1/memberships/usr_2', (_req, res) => {
      res.writeHead(204)
      res.end()
    })
    expect(await client.listMembers('org_1')).toHaveLength(1)
    expect(await client.inviteMember('org_1', { email: 'b@x', role: 'member' })).toMatchObject({ status: 'pending', role: 'member' })
    expect(await client.updateMember('org_1', 'usr_2', { role: 'admin' })).toMatchObject({ role: 'admin' })
    await expect(client.removeMember('org_1', 'usr_2')).resolves.toBeUndefined()
    expect(api.requests.map((r) => r.body)).toEqual([undefined, { email: 'b@x', role: 'member' }, { role: 'admin' }, undefined])
  })
})

describe(normalizeApiUrl.name, () => {
  it('accepts the origin with or without /v1 and a trailing slash', () => {
    expect(normalizeApiUrl('http://h:7070')).toBe('http://h:7070')
    expect(normalizeApiUrl('http://h:7070/')).toBe('http://h:7070')
    expect(normalizeApiUrl('https://h/corral/v1/')).toBe('https://h/corral')
  })

  it('rejects what is not an http(s) URL', () => {
    expect(() => normalizeApiUrl('h:7070')).toThrow(/invalid API URL/)
    expect(() => normalizeApiUrl('ftp://h')).toThrow(/invalid API URL/)
  })
})
