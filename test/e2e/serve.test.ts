import { statSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runCorral, startServe, type RunningServe } from '../helpers/serve.js'

async function api(s: RunningServe, method: string, path: string, token?: string, body?: unknown) {
  const res = await fetch(`${s.url}${path}`, {
    method,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined }
}

describe('corral serve (real process)', () => {
  let s: RunningServe
  beforeAll(async () => {
    s = await startServe({ env: { CORRAL_LOG_LEVEL: 'info' } })
  })
  afterAll(() => s?.stop())

  it('bootstraps org default with an owner key printed once and saved 0600', async () => {
    expect(s.adminKey).toMatch(/^crl_/)
    expect(statSync(join(s.dataDir, 'admin.key')).mode & 0o777).toBe(0o600)
    expect(s.output().split(s.adminKey).length - 1).toBe(1)
    expect(s.output().match(/^corral ready: /gm)).toHaveLength(1)
    const me = await api(s, 'GET', '/v1/me', s.adminKey)
    expect(me.status).toBe(200)
    expect(me.body).toMatchObject({ org: { name: 'default', posture: 'active' }, permission_set: 'full_access', user_id: 'system' })
    expect((await api(s, 'GET', '/healthz')).body).toMatchObject({ status: 'ok', audit: { rejected: 0 } })
    expect((await api(s, 'GET', '/readyz')).body).toEqual({ status: 'ready' })
    const missing = await api(s, 'GET', '/v1/does-not-exist', s.adminKey)
    expect(missing.status).toBe(404)
    expect(missing.body.error.request_id).toBe(missing.headers.get('x-request-id'))
  })

  it('admin commands work against the running server\'s store', async () => {
    const store = ['--data-dir', s.dataDir]
    const org = await runCorral(['admin', 'org', 'create', 'acme', '--json', ...store])
    expect(org.code, org.stderr).toBe(0)
    const created = JSON.parse(org.stdout)
    expect(created).toMatchObject({ org: { id: expect.stringMatching(/^org_/), name: 'acme' }, api_key: { id: expect.stringMatching(/^key_/), value: expect.stringMatching(/^crl_/) } })
    expect((await api(s, 'GET', '/v1/me', created.api_key.value)).body.org.id).toBe(created.org.id)

    const dup = await runCorral(['admin', 'org', 'create', 'acme', ...store])
    expect(dup.code).toBe(1)
    expect(dup.stderr).toContain('already exists')

    const user = await runCorral(['admin', 'user', 'create', '--org', created.org.id, '--email', 'dev@acme.test', '--role', 'member', '--json', ...store])
    expect(user.code, user.stderr).toBe(0)
    const u = JSON.parse(user.stdout)
    expect(u.user).toMatchObject({ id: expect.stringMatching(/^usr_/), email: 'dev@acme.test', role: 'member' })
    const me = await api(s, 'GET', '/v1/me', u.token)
    expect(me.body).toMatchObject({ kind: 'session', user_id: u.user.id, role: 'member', org: { id: created.org.id } })

    const bad = await runCorral(['admin', 'org', 'posture', created.org.id, 'sleepy', ...store])
    expect(bad.code).toBe(2)
    const posture = await runCorral(['admin', 'org', 'posture', created.org.id, 'past_due', ...store])
    expect(posture.code, posture.stderr).toBe(0)
    const refused = await api(s, 'POST', '/v1/api-keys', created.api_key.value, { label: 'x', permission_set: 'read_only' })
    expect(refused.status).toBe(403)
    expect(refused.body.error).toMatchObject({ code: 'tenant_inactive', details: { posture: 'past_due' } })
    expect((await api(s, 'DELETE', `/v1/api-keys/${created.api_key.id}`, created.api_key.value)).status).toBe(200)
    expect((await api(s, 'GET', '/v1/me', created.api_key.value)).status).toBe(401)
  })

  it('never writes a credential into its JSON logs', async () => {
    const k = await api(s, 'POST', '/v1/api-keys', s.adminKey, { label: 'logged', permission_set: 'read_only' })
    await fetch(`${s.url}/v1/activity/stream?api_key=${encodeURIComponent(k.body.value)}`).then((r) => r.body?.cancel())
    const logLines = s.output().split('\n').filter((l) => l.startsWith('{'))
    expect(logLines.length).toBeGreaterThan(0)
    const logs = logLines.join('\n')
    expect(logs).not.toContain(s.adminKey)
    expect(logs).not.toContain(k.body.value)
    expect(logs).toContain('"request_id":"req_')
  })
})

describe('corral serve lifecycle', () => {
  it('drains and flushes on SIGTERM (exit 0), and a second start reuses the store and key', async () => {
    const first = await startServe()
    const created = await api(first, 'POST', '/v1/api-keys', first.adminKey, { label: 'before restart', permission_set: 'read_only' })
    expect(created.status).toBe(201)
    expect(await first.stop({ keepDataDir: true })).toBe(0)

    const second = await startServe({ dataDir: first.dataDir })
    try {
      expect(second.adminKey).toBe(first.adminKey)
      expect(second.output()).not.toContain('shown once')
      const page = await api(second, 'GET', '/v1/audit?filter=event_type=api_key_created', second.adminKey)
      expect(page.body.events.map((e: { detail: { label: string } }) => e.detail.label)).toContain('before restart')
      expect((await api(second, 'GET', '/v1/me', created.body.value)).status).toBe(200)
    } finally {
      expect(await second.stop()).toBe(0)
    }
  })
})
