import { connect, type AddressInfo } from 'node:net'
import { Writable } from 'node:stream'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createHarness, type Harness } from './harness.js'

describe('app: envelope, posture, rate limit, health, logs', () => {
  let h: Harness
  const lines: string[] = []
  beforeAll(async () => {
    const logs = new Writable({
      write(chunk, _enc, cb) {
        lines.push(...String(chunk).split('\n').filter(Boolean))
        cb()
      },
    })
    h = await createHarness({ logs })
  })
  afterAll(() => h.close())

  it('answers unknown routes with the 404 envelope, inside and outside /v1', async () => {
    for (const url of ['/nope', '/v1/nope', '/v1/api-keys/x/y']) {
      const res = await h.inject('GET', url)
      expect(res.status).toBe(404)
      expect(res.body.error).toMatchObject({ code: 'not_found' })
      expect(res.body.error.request_id).toBe(res.headers['x-request-id'])
    }
  })

  it('serves health and readiness without auth', async () => {
    expect((await h.inject('GET', '/healthz')).body).toMatchObject({ status: 'ok', audit: { pending: 0 } })
    expect((await h.inject('GET', '/readyz')).body).toEqual({ status: 'ready' })
  })

  it('refuses writes with tenant_inactive in every inactive posture, but allows reads and key revoke', async () => {
    for (const posture of ['past_due', 'decommissioning', 'trial_expired'] as const) {
      const { orgId, ownerToken } = await h.newOrg()
      const victim = await h.key(orgId, 'read_only')
      await h.store.orgs.setPosture(orgId, posture)
      const refused = await h.inject('POST', '/v1/api-keys', { token: ownerToken, body: { label: 'x', permission_set: 'read_only' } })
      expect(refused.status).toBe(403)
      expect(refused.body.error).toMatchObject({ code: 'tenant_inactive', details: { posture } })
      expect((await h.inject('POST', `/v1/orgs/${orgId}/memberships`, { token: ownerToken, body: { email: 'a@b.co', role: 'member' } })).body.error.code).toBe('tenant_inactive')
      expect((await h.inject('GET', '/v1/api-keys', { token: ownerToken })).status).toBe(200)
      expect((await h.inject('DELETE', `/v1/api-keys/${victim.id}`, { token: ownerToken })).status).toBe(200)
      await h.store.orgs.setPosture(orgId, 'active')
      expect((await h.inject('POST', '/v1/api-keys', { token: ownerToken, body: { label: 'x', permission_set: 'read_only' } })).status).toBe(201)
    }
  })

  it('refuses unsupported content types and unknown query parameters with the envelope', async () => {
    const { orgId } = await h.newOrg()
    const k = await h.key(orgId, 'full_access')
    const res = await h.app.inject({ method: 'POST', url: '/v1/api-keys', headers: { authorization: `Bearer ${k.value}`, 'content-type': 'application/xml' }, payload: '<a/>' })
    expect(res.statusCode).toBe(415)
    expect(res.json().error.code).toBe('unsupported_media_type')
    const q = await h.inject('GET', '/v1/audit?bogus=1', { token: k.value })
    expect(q.status).toBe(400)
    expect(q.body.error.details.fields).toHaveProperty('bogus')
  })

  it('treats an empty JSON body as no body, and refuses prototype poisoning', async () => {
    const { orgId, ownerKey } = await h.newOrg()
    const k = await h.key(orgId, 'read_only')
    const del = await h.inject('DELETE', `/v1/api-keys/${k.id}`, { token: ownerKey, payload: '' })
    expect(del.status).toBe(200)
    const empty = await h.inject('POST', '/v1/api-keys', { token: ownerKey, payload: '' })
    expect(empty.status).toBe(400)
    expect(empty.body.error.code).toBe('validation_error')
    const poisoned = await h.inject('POST', '/v1/api-keys', { token: ownerKey, payload: '{"label":"x","permission_set":"read_only","__proto__":{"admin":true}}' })
    expect(poisoned.status).toBe(400)
    expect(poisoned.body.error.code).toBe('validation_error')
  })

  it('logs JSON lines with the request id and never a credential', async () => {
    const { orgId, ownerToken } = await h.newOrg()
    const k = await h.key(orgId, 'full_access')
    const created = await h.inject('POST', '/v1/api-keys', { token: k.value, body: { label: 'logged', permission_set: 'read_only' } })
    await h.inject('GET', `/v1/activity/stream-does-not-exist?api_key=${k.value}`)
    await h.inject('GET', '/v1/me', { token: ownerToken })
    const text = lines.join('\n')
    expect(text).toContain(String(created.headers['x-request-id']))
    for (const secret of [k.value, created.body.value, ownerToken]) expect(text).not.toContain(secret)
    const parsed = lines.map((l) => JSON.parse(l))
    expect(parsed.some((l) => l.request_id === created.headers['x-request-id'])).toBe(true)
  })
})

describe('app: rate limit', () => {
  let limited: Harness
  beforeAll(async () => {
    limited = await createHarness({ config: { rateLimit: { capacity: 3, refillPerSecond: 0.01 } } })
  })
  afterAll(() => limited.close())

  it('rate-limits per credential with 429 and an integer Retry-After', async () => {
    const h = limited
    const { orgId } = await h.newOrg()
    const a = await h.key(orgId, 'read_only')
    const b = await h.key(orgId, 'read_only')
    for (let i = 0; i < 3; i++) expect((await h.inject('GET', '/v1/me', { token: a.value })).status).toBe(200)
    const refused = await h.inject('GET', '/v1/me', { token: a.value })
    expect(refused.status).toBe(429)
    expect(refused.body.error.code).toBe('rate_limited')
    expect(String(refused.headers['retry-after'])).toMatch(/^[1-9]\d*$/)
    expect((await h.inject('GET', '/v1/me', { token: b.value })).status).toBe(200)
  })

})

describe('app: route declarations', () => {
  it('every /v1 route declares its permission (or auth: false), and my routes a response schema', async () => {
    const h = await createHarness()
    try {
      const routes: Array<{ method: string; url: string; config: any; schema: any }> = []
      // printRoutes has no structured form: register the same route list under an onRoute spy.
      const spyApp = (await import('fastify')).default()
      spyApp.addHook('onRoute', (r) => void routes.push({ method: String(r.method), url: r.url, config: r.config, schema: r.schema }))
      const { V1_ROUTES } = await import('../../src/server/routes/index.js')
      const { taskLimiter } = await import('../../src/server/task-input.js')
      await spyApp.register(async (v1) => {
        for (const plugin of V1_ROUTES) await v1.register(async (scope) => plugin(scope, h.deps, { taskLimiter: taskLimiter(h.deps.config) }))
      }, { prefix: '/v1' })
      await spyApp.ready()
      await spyApp.close()
      const v1 = routes.filter((r) => r.url.startsWith('/v1') && r.method !== 'HEAD')
      expect(v1.length).toBeGreaterThan(10)
      for (const r of v1) expect(r.config?.auth === false || r.config?.permission !== undefined, `${r.method} ${r.url}`).toBe(true)
      const mine = v1.filter((r) => /\/(api-keys|audit|orgs|me|webhooks)/.test(r.url))
      for (const r of mine) expect(r.schema?.response, `${r.method} ${r.url}`).toBeDefined()
    } finally {
      await h.close()
    }
  })

  it('refuses to start with a /v1 route that declares no permission', async () => {
    const h = await createHarness()
    try {
      const { V1_ROUTES } = await import('../../src/server/routes/index.js')
      const { taskLimiter } = await import('../../src/server/task-input.js')
      const { buildApp } = await import('../../src/server/app.js')
      const list = V1_ROUTES as Array<(app: any) => Promise<void>>
      const careless = async (app: any) => void app.get('/careless', async () => ({}))
      list.push(careless)
      try {
        await expect(buildApp(h.deps)).rejects.toThrow(/declares neither config.permission/)
      } finally {
        list.pop()
      }
    } finally {
      await h.close()
    }
  })
})

describe('app: shutdown', () => {
  it('lets an in-flight request finish during close, closes its keep-alive connection, and refuses new ones', async () => {
    const h = await createHarness()
    const { orgId } = await h.newOrg()
    const k = await h.key(orgId, 'read_only')
    expect((await h.inject('GET', '/v1/me', { token: k.value })).status).toBe(200) // key now cached
    await h.app.listen({ port: 0, host: '127.0.0.1' })
    const port = (h.app.server.address() as AddressInfo).port
    // Hold the request inside the handler chain (a cached key still reads its org).
    const realGet = h.store.orgs.get
    let release!: () => void
    const gate = new Promise<void>((r) => (release = r))
    let entered!: () => void
    const inside = new Promise<void>((r) => (entered = r))
    h.store.orgs.get = async (id: string) => {
      entered()
      await gate
      return realGet(id)
    }
    const socket = connect(port, '127.0.0.1')
    let raw = ''
    socket.on('data', (c) => (raw += String(c)))
    const socketClosed = new Promise<void>((r) => socket.on('close', () => r()))
    socket.write(`GET /v1/me HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${k.value}\r\nConnection: keep-alive\r\n\r\n`)
    await inside
    const closed = h.app.close()
    await new Promise((r) => setTimeout(r, 50))
    const refused = await new Promise<string>((r) => connect(port, '127.0.0.1').on('error', (e: NodeJS.ErrnoException) => r(String(e.code))).on('connect', () => r('connected')))
    release()
    await closed // resolves without waiting for the client's keep-alive timeout
    await socketClosed
    h.store.orgs.get = realGet
    expect(raw).toMatch(/^HTTP\/1\.1 200/)
    expect(raw.toLowerCase()).toContain('connection: close')
    expect(raw).toContain('"kind":"api_key"')
    expect(refused).toBe('ECONNREFUSED')
    await h.close()
  })
})
