import { execFile } from 'node:child_process'
import { stat } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { AuditEvent } from '../../src/contract/index.js'
import { isStaticAuthProvider } from '../../src/policy/index.js'
import { MaterialInputError, OrgMaterialAdmin, Sealer, loadMasterKey, secretBinding } from '../../src/secrets/index.js'
import { startHarness, type Harness } from './harness.js'

const run = promisify(execFile)

const CAPS = `
- name: apis
  type: http
  allow:
    - name: gh
      domains: ["127.0.0.1"]
      methods: [GET, POST]
      paths: ["/gh/*"]
    - name: maps
      domains: ["127.0.0.1"]
      methods: [GET]
      paths: ["/maps/*"]
    - name: jira
      domains: ["127.0.0.1"]
      methods: [GET]
      paths: ["/jira/*"]
    - name: insecure
      domains: ["localhost"]
      methods: [GET]
      allow_insecure: true
  transforms:
    - name: key-header
      applies_to: [gh]
      header: { name: x-api-key, action: set, value: 'secrets["api_key"]' }
    - name: gh-auth
      applies_to: [gh, insecure]
      auth: { credential: github-bot, provider: github }
    - name: maps-auth
      applies_to: [maps]
      auth: { credential: maps-key, provider: google-maps }
    - name: jira-auth
      applies_to: [jira]
      auth: { credential: jira-user, provider: jira }
`

describe('secrets and credentials', () => {
  let h: Harness
  let admin: OrgMaterialAdmin
  let ws: { workspaceId: string; token: string }
  let before = 0
  const base = (): string => `https://127.0.0.1:${h.up.httpsPort}`
  const newRows = async (n: number): Promise<AuditEvent[]> => (await h.audit.waitForDecisions(before + n)).slice(before)
  let received: { url: string; headers: Record<string, string> } = { url: '', headers: {} }
  const SECRET = 'sk-secret-value-123'
  const GH = 'ghp_tokenvalue456'

  beforeAll(async () => {
    h = await startHarness()
    // The echo the agent gets is scrubbed (test/security/credential-echo.test.ts); what the
    // upstream really received is kept here.
    h.up.handler.current = (req, res) => {
      received = { url: req.url ?? '', headers: req.headers as Record<string, string> }
      res.end(JSON.stringify(received))
    }
    admin = new OrgMaterialAdmin(h.store, new Sealer(await loadMasterKey(join(h.dir, 'data'))), h.audit, isStaticAuthProvider)
    const actor = { orgId: h.orgId, userId: h.userId }
    await admin.setSecret(actor, 'api_key', SECRET)
    await admin.createCredential(actor, { name: 'github-bot', provider: 'github', kind: 'static_token', token: GH })
    await admin.createCredential(actor, { name: 'maps-key', provider: 'google-maps', kind: 'query_key', token: 'mapskey789' })
    await admin.createCredential(actor, { name: 'jira-user', provider: 'jira', kind: 'basic_auth', username: 'bot@example.com', password: 'jirapass' })
    ws = await h.workspace(CAPS)
  })
  afterAll(async () => {
    await h.close()
  })
  beforeEach(() => {
    before = h.audit.decisions().length
  })

  it('seals with AES-256-GCM bound to the row; the key file is 0600', async () => {
    const key = await loadMasterKey(join(h.dir, 'data'))
    const s = new Sealer(key)
    const sealed = s.seal('v', secretBinding('org_a', 'n'))
    expect(sealed).not.toContain('v.')
    expect(s.open(sealed, secretBinding('org_a', 'n'))).toBe('v')
    expect(() => s.open(sealed, secretBinding('org_b', 'n'))).toThrow()
    expect((await stat(join(h.dir, 'data', 'master.key'))).mode & 0o777).toBe(0o600)
    const env = await loadMasterKey('/nonexistent', { CORRAL_MASTER_KEY: 'ab'.repeat(32) })
    expect(env.toString('hex')).toBe('ab'.repeat(32))
  })

  it('stores only ciphertext, lists metadata only, emits secret/credential events without values', async () => {
    const raw = JSON.stringify(await h.store.db.selectFrom('secrets' as never).selectAll().execute())
    expect(raw).not.toContain(SECRET)
    const list = await admin.listSecrets({ orgId: h.orgId, userId: h.userId })
    expect(list.map((s) => s.name)).toEqual(['api_key'])
    expect(JSON.stringify(list)).not.toContain(SECRET)
    const events = h.audit.rows.filter((r) => /^(secret|credential)_/.test(r.event_type))
    expect(events.map((e) => e.event_type)).toEqual(['secret_created', 'credential_created', 'credential_created', 'credential_created'])
    expect(events[1]!.detail).toMatchObject({ name: 'github-bot', provider: 'github', kind: 'static_token', status: 'active' })
    expect(JSON.stringify(events)).not.toMatch(/sk-secret|ghp_|mapskey|jirapass/)
    await expect(admin.createCredential({ orgId: h.orgId, userId: h.userId }, { name: 'x', provider: 'nope', kind: 'static_token', token: 't' })).rejects.toBeInstanceOf(MaterialInputError)
  })

  it('injects a secret by header transform and a credential by provider placement (Bearer), invisible to the agent', async () => {
    const res = await h.fetch(`${base()}/gh/repos`, { token: ws.token })
    expect(received.headers['x-api-key']).toBe(SECRET)
    expect(received.headers.authorization).toBe(`Bearer ${GH}`)
    expect(res.body).not.toMatch(/sk-secret|ghp_/)
    const [row] = await newRows(1)
    expect(row).toMatchObject({ decision: 'allow', auth_used: ['github-bot'], auth_failures: {}, transforms_failed: {}, transforms_applied: 2 })
    expect(JSON.stringify(row)).not.toMatch(/sk-secret|ghp_/)
  })

  it('query-key and basic-auth placements', async () => {
    await h.fetch(`${base()}/maps/geo?q=1`, { token: ws.token })
    expect(received.url).toBe('/maps/geo?q=1&key=mapskey789')
    await h.fetch(`${base()}/jira/issue`, { token: ws.token })
    expect(received.headers.authorization).toBe('Basic ' + Buffer.from('bot@example.com:jirapass').toString('base64'))
    const rows = await newRows(2)
    expect(rows.map((r) => r.auth_used)).toEqual([['maps-key'], ['jira-user']])
  })

  it('refuses to inject over plain HTTP: auth_unavailable in both maps, request still goes', async () => {
    const res = await h.fetch(`http://localhost:${h.up.httpPort}/x`, { token: ws.token })
    expect(res.status).toBe(200)
    expect((JSON.parse(res.body) as { headers: Record<string, string> }).headers.authorization).toBeUndefined()
    const [row] = await newRows(1)
    expect(row).toMatchObject({ decision: 'allow', auth_used: [], transforms_failed: { 'gh-auth': 'auth_unavailable' }, auth_failures: { 'github-bot': 'auth_unavailable' } })
  })

  it('refuses to inject when the Host header disagrees with the tunnel host (curl -H Host)', async () => {
    const { stdout } = await run('curl', ['-sS', '-x', h.proxyUrl, '--proxy-header', `Proxy-Authorization: Bearer ${ws.token}`, '--cacert', join(h.dir, 'data', 'ca.pem'), '-H', 'Host: evil.example', `${base()}/gh/repos`])
    expect(stdout).not.toContain('ghp_')
    expect(JSON.parse(stdout)).toHaveProperty('headers', expect.not.objectContaining({ authorization: expect.anything() }))
    const [row] = await newRows(1)
    expect(row).toMatchObject({ auth_failures: { 'github-bot': 'auth_unavailable' } })
  })

  it('a credential that cannot be minted (deleted) gives auth_unavailable; a missing secret gives apply_error', async () => {
    const actor = { orgId: h.orgId, userId: h.userId }
    const cred = (await admin.listCredentials(actor)).find((c) => c.name === 'github-bot')!
    await admin.deleteCredential(actor, cred.id)
    await admin.deleteSecret(actor, 'api_key')
    await new Promise((r) => setTimeout(r, 50)) // the bus notification invalidates the proxy's copies
    const res = await h.fetch(`${base()}/gh/repos`, { token: ws.token })
    const echo = JSON.parse(res.body) as { headers: Record<string, string> }
    expect(echo.headers.authorization).toBeUndefined()
    expect(echo.headers['x-api-key']).toBeUndefined()
    const [row] = await newRows(1)
    expect(row).toMatchObject({ transforms_failed: { 'gh-auth': 'auth_unavailable', 'key-header': 'apply_error' }, auth_failures: { 'github-bot': 'auth_unavailable' }, auth_used: [] })
    expect(h.audit.rows.filter((r) => r.event_type === 'credential_deleted' || r.event_type === 'secret_deleted')).toHaveLength(2)
  })
})
