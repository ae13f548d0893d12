// Which credential an auth transform uses (docs/credentials.md "Which credential a transform
// uses"): the workspace creator's personal credential of the transform's name wins over the org's
// of that name; a workspace whose creator has none uses the org's; a personal credential that
// cannot be minted (not active) is not replaced by the org's; nobody else's personal credential is
// ever used. Real proxy, real TLS upstream on loopback; SQLite and PostgreSQL.
import { join } from 'node:path'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { AuditEvent } from '../../src/contract/index.js'
import { isStaticAuthProvider } from '../../src/policy/index.js'
import { OrgMaterialAdmin, Sealer, loadMasterKey } from '../../src/secrets/index.js'
import { testDialects } from '../helpers/dialects.js'
import { startHarness, type Harness } from './harness.js'

const CAPS = `
- name: apis
  type: http
  allow:
    - name: gh
      domains: ["127.0.0.1"]
      methods: [GET]
      paths: ["/gh/*"]
    - name: mine
      domains: ["127.0.0.1"]
      methods: [GET]
      paths: ["/mine/*"]
  transforms:
    - name: gh-auth
      applies_to: [gh]
      auth: { credential: github-bot, provider: github }
    - name: mine-auth
      applies_to: [mine]
      auth: { credential: only-personal, provider: github }
`

for (const d of testDialects()) describe(`auth transforms choose between the creator’s personal credential and the org’s [${d.name}]`, () => {
  let h: Harness
  let admin: OrgMaterialAdmin
  let before = 0
  let received: Record<string, string | undefined> = {}
  const base = (): string => `https://127.0.0.1:${h.up.httpsPort}`
  const BOB = 'usr_bob_without_personal'
  const CAROL = 'usr_carol_pending'
  const tokens: Record<string, string> = {}

  beforeAll(async () => {
    h = await startHarness({ store: await d.open() })
    h.up.handler.current = (req, res) => {
      received = { authorization: req.headers.authorization }
      res.end('ok')
    }
    admin = new OrgMaterialAdmin(h.store, new Sealer(await loadMasterKey(join(h.dir, 'data'))), h.audit, isStaticAuthProvider)
    const cred = (userId: string, name: string, token: string, personal: boolean) =>
      admin.createCredential({ orgId: h.orgId, userId }, { name, provider: 'github', kind: 'static_token', token, personal })
    await cred(h.userId, 'github-bot', 'ghp_org', false)
    await cred(h.userId, 'github-bot', 'ghp_alice', true)
    await cred(h.userId, 'only-personal', 'ghp_alice_only', true)
    const carols = await cred(CAROL, 'github-bot', 'ghp_carol', true)
    await h.store.db.updateTable('credentials' as never).set({ status: 'pending' } as never).where('id' as never, '=', carols.id as never).execute()
    const alice = await h.workspace(CAPS)
    tokens.alice = alice.token
    for (const [who, userId] of [['bob', BOB], ['carol', CAROL]] as const) {
      const ws = await h.tables.workspaces.create(h.orgId, { role_id: alice.roleId, created_by_user_id: userId })
      tokens[who] = await h.token(ws)
    }
  })
  afterAll(() => h.close())
  beforeEach(() => {
    before = h.audit.decisions().length
    received = {}
  })
  const row = async (): Promise<AuditEvent> => (await h.audit.waitForDecisions(before + 1))[before]!

  it('the creator’s personal credential wins', async () => {
    await h.fetch(`${base()}/gh/x`, { token: tokens.alice! })
    expect(received.authorization).toBe('Bearer ghp_alice')
    expect(await row()).toMatchObject({ auth_used: ['github-bot'], auth_failures: {} })
  })

  it('a creator without one gets the org’s; another member’s personal credential is never used', async () => {
    await h.fetch(`${base()}/gh/x`, { token: tokens.bob! })
    expect(received.authorization).toBe('Bearer ghp_org')
    expect(await row()).toMatchObject({ auth_used: ['github-bot'] })
    before = h.audit.decisions().length
    await h.fetch(`${base()}/mine/x`, { token: tokens.bob! })
    expect(received.authorization).toBeUndefined()
    expect(await row()).toMatchObject({ auth_used: [], auth_failures: { 'only-personal': 'auth_unavailable' }, transforms_failed: { 'mine-auth': 'auth_unavailable' } })
  })

  it('a personal credential that is not active is not replaced by the org’s', async () => {
    await h.fetch(`${base()}/gh/x`, { token: tokens.carol! })
    expect(received.authorization).toBeUndefined()
    expect(await row()).toMatchObject({ auth_used: [], auth_failures: { 'github-bot': 'auth_unavailable' } })
  })

  it('personal material is sealed to its owner: moved into the org’s row it does not decrypt', async () => {
    const rows = await h.store.db.selectFrom('credentials' as never).selectAll().execute() as Array<{ name: string; owner_user_id: string | null; ciphertext: string }>
    const alices = rows.find((r) => r.name === 'github-bot' && r.owner_user_id === h.userId)!
    await h.store.db.updateTable('credentials' as never).set({ ciphertext: alices.ciphertext } as never)
      .where('name' as never, '=', 'github-bot' as never).where('owner_user_id' as never, 'is', null as never).execute()
    await h.store.notify('corral_credentials', h.orgId)
    // The announcement reaches the proxy asynchronously (LISTEN/NOTIFY on Postgres): ask until its copy is gone (bounded).
    let last: AuditEvent | undefined
    for (let i = 0; i < 50; i++) {
      before = h.audit.decisions().length
      received = {}
      await h.fetch(`${base()}/gh/x`, { token: tokens.bob! })
      last = await row()
      if (received.authorization === undefined) break
      await new Promise((r) => setTimeout(r, 100))
    }
    expect(received.authorization).toBeUndefined()
    expect(last).toMatchObject({ auth_failures: { 'github-bot': 'auth_unavailable' } })
  })
})
