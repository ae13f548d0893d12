// The console's write pages in chromium against a real `corral dev` whose public URL is its own
// address, with a real OpenID Connect provider (oidc-provider on HTTPS loopback, test/helpers/oidc.ts).
// Credentials: a static token created from the page (the secret sent once, never on the page
// again); an OAuth credential created pending, then authorized from the page — the provider's page
// opens in a new tab, the browser follows it back to corral's callback (with the state cookies the
// start set) and the page sees the credential turn active. Packs, roles, providers: a pack archive
// uploaded from the browser, its metadata edited, attached to a role edited from the page, a
// provider edited. A read_only key sees none of the write buttons. Needs `npm run build`.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { AxeBuilder } from '@axe-core/playwright'
import type { Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LeafMinter, loadOrCreateCa } from '../../src/proxy/index.js'
import { startDev, type RunningDev } from '../helpers/dev.js'
import { startOidcProvider, type OidcProvider } from '../helpers/oidc.js'
import { chromiumAvailable, launchBrowser, type TestBrowser } from './browser.js'

const available = chromiumAvailable()

async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const { port } = server.address() as AddressInfo
  await new Promise((r) => server.close(r))
  return port
}

const HELLO_PACK = resolve(import.meta.dirname, '../../examples/packs/hello-pack')

describe.runIf(available)('console write pages: credentials (with an OAuth provider), packs, roles, providers (chromium)', () => {
  let tmp: string
  let dev: RunningDev
  let idp: OidcProvider
  let browser: TestBrowser
  let page: Page
  let errors: { cspViolations: string[]; consoleErrors: string[] }
  const TOKEN = 'ghp_console-static-SECRET-9f3a1c'
  const api = async (method: string, path: string, body?: unknown, token = dev.adminKey) => {
    const res = await fetch(`${dev.url}/v1${path}`, {
      method, headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    })
    return { status: res.status, body: (await res.json()) as any }
  }
  const credential = async (name: string) => (await api('GET', '/credentials')).body.credentials.find((c: { name: string }) => c.name === name)
  const serious = async (p: Page) =>
    (await new AxeBuilder({ page: p }).analyze()).violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => v.id)

  beforeAll(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'corral-console-cred-'))
    const ca = await loadOrCreateCa(join(tmp, 'idp-ca'))
    writeFileSync(join(tmp, 'idp-ca.pem'), ca.certPem)
    const port = await freePort()
    const publicUrl = `http://127.0.0.1:${port}`
    idp = await startOidcProvider({ tls: await new LeafMinter(ca).pemFor('127.0.0.1'), caPem: ca.certPem, redirectUri: `${publicUrl}/v1/oauth/callback` })
    const env = { XDG_CONFIG_HOME: join(tmp, 'config'), CORRAL_PUBLIC_URL: publicUrl, CORRAL_UPSTREAM_CA: join(tmp, 'idp-ca.pem'), CORRAL_OAUTH_ALLOW_PRIVATE: '127.0.0.1' } // the provider is on loopback: the operator's opt-in
    ;[dev, browser] = await Promise.all([startDev(join(tmp, 'data'), env, ['--runtime', 'process'], port), launchBrowser({ ignoreHttpsErrors: true })])
    const opened = await browser.page()
    page = opened.page
    errors = opened
    await page.goto(`${dev.url}/`)
    await page.getByLabel('API key or session token').fill(dev.adminKey)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('heading', { name: 'Workspaces', exact: true }).waitFor()
  })
  afterAll(async () => {
    await browser?.close()
    await dev?.stop()
    await idp?.close()
    if (tmp) rmSync(tmp, { recursive: true, force: true })
  })

  it('creates a static token credential; the secret is sent once and never shown', async () => {
    await page.goto(`${dev.url}/#/credentials`)
    await page.getByRole('heading', { name: 'Credentials', exact: true }).waitFor()
    await page.getByRole('button', { name: 'Create credential' }).click()
    const form = page.getByRole('form', { name: 'Create credential' })
    await form.getByLabel('Name').fill('gh-bot')
    await form.getByLabel('Kind').selectOption('static_token')
    await form.getByLabel('Provider').selectOption('github')
    await form.getByLabel('Token').fill(TOKEN)
    expect(await serious(page)).toEqual([])
    await form.getByRole('button', { name: 'Create' }).click()
    await page.getByRole('status').filter({ hasText: 'Created gh-bot (active)' }).waitFor()
    await page.getByTestId('status-gh-bot').waitFor()
    expect(await page.getByTestId('status-gh-bot').textContent()).toBe('active')
    expect(await credential('gh-bot')).toMatchObject({ provider: 'github', kind: 'static_token', status: 'active' })
    expect(await page.content()).not.toContain(TOKEN)
    // Opening the form again starts empty: the page kept nothing.
    await page.getByRole('button', { name: 'Create credential' }).click()
    await form.getByLabel('Kind').selectOption('static_token')
    expect(await form.getByLabel('Token').inputValue()).toBe('')
    await page.getByRole('button', { name: 'Create credential' }).click()
  })

  it('creates an OAuth credential pending, authorizes it through the provider in a new tab, and sees it active', async () => {
    await page.getByRole('button', { name: 'Create credential' }).click()
    const form = page.getByRole('form', { name: 'Create credential' })
    await form.getByLabel('Name').fill('mail')
    await form.getByLabel('Kind').selectOption('oauth')
    await form.getByLabel('Provider').selectOption('microsoft')
    await form.getByLabel('Client id').fill(idp.clientId)
    await form.getByLabel('Client secret').fill(idp.clientSecret)
    await form.getByLabel('Issuer (https)').fill(idp.issuer)
    await form.getByLabel('Scopes (space-separated)').fill('openid offline_access')
    await form.getByRole('button', { name: 'Create' }).click()
    await page.getByRole('status').filter({ hasText: 'Created mail (pending)' }).waitFor()
    await page.getByTestId('status-mail').waitFor()
    expect(await page.getByTestId('status-mail').textContent()).toBe('pending')
    // Consent: the provider's page opens in a new tab and comes back to corral's callback.
    const popup = page.waitForEvent('popup')
    await page.getByRole('button', { name: 'Authorize mail' }).click()
    const tab = await popup
    await page.getByRole('status').filter({ hasText: 'Waiting for consent' }).waitFor()
    await tab.waitForURL(/\/v1\/oauth\/callback\?/, { timeout: 15_000 })
    await expect.poll(() => page.getByTestId('status-mail').textContent(), { timeout: 10_000 }).toBe('active')
    await page.getByRole('status').filter({ hasText: 'consent recorded' }).waitFor()
    expect(await credential('mail')).toMatchObject({ kind: 'oauth', status: 'active' })
    expect(await page.content()).not.toContain(idp.clientSecret)
    await tab.close()
    expect(await serious(page)).toEqual([])
  })

  it('uploads a pack archive from the browser, edits its metadata, attaches it to a role and edits a provider', async () => {
    const archive = join(tmp, 'hello-pack.tar.gz')
    execFileSync('tar', ['czf', archive, '-C', HELLO_PACK, '.'])
    await page.goto(`${dev.url}/#/packs`)
    await page.getByRole('heading', { name: 'Packs', exact: true }).waitFor()
    await page.getByRole('button', { name: 'Upload pack' }).click()
    const upload = page.getByRole('form', { name: 'Upload pack' })
    await upload.getByLabel(/^Pack archive/).setInputFiles(archive)
    await upload.getByLabel('Visibility').selectOption('org')
    await upload.getByRole('button', { name: 'Create' }).click()
    await page.getByRole('status').filter({ hasText: 'Uploaded hello-pack 1.0.0.' }).waitFor()
    const pack = (await api('GET', '/packs')).body.packs.find((p: { name: string }) => p.name === 'hello-pack')
    expect(pack).toMatchObject({ owned: true, visibility: 'org', image_origin: 'upload' })
    await page.getByRole('button', { name: 'Edit hello-pack' }).click()
    const edit = page.getByRole('form', { name: 'Edit hello-pack' })
    expect(await edit.getByLabel('Category').inputValue()).toBe('examples')
    await edit.getByLabel('Category').fill('greetings')
    expect(await serious(page)).toEqual([])
    await edit.getByRole('button', { name: 'Save' }).click()
    await page.getByRole('status').filter({ hasText: 'Saved hello-pack.' }).waitFor()
    expect((await api('GET', `/packs/${pack.id}`)).body).toMatchObject({ category: 'greetings', display_name: 'Hello pack' })

    await page.goto(`${dev.url}/#/roles`)
    await page.getByRole('button', { name: 'Edit demo' }).click()
    const role = page.getByRole('form', { name: 'Edit demo' })
    await role.getByLabel('Packs').selectOption({ label: 'hello-pack 1.0.0' })
    await role.getByLabel('Idle timeout (s)').fill('900')
    expect(await serious(page)).toEqual([])
    await role.getByRole('button', { name: 'Save' }).click()
    await page.getByRole('status').filter({ hasText: 'Saved demo' }).waitFor()
    const demo = (await api('GET', '/agent-roles?name=demo')).body.agent_roles[0]
    expect(demo).toMatchObject({ pack_ids: [pack.id], idle_timeout_seconds: 900, environment: 'development' })
    // Only what changed went out: the role's policy is as it was.
    expect((await api('GET', '/audit?filter=event_type=agent_role_updated')).body.events[0].detail.patched_fields).toEqual(['idle_timeout_seconds', 'pack_ids'])

    await page.goto(`${dev.url}/#/providers`)
    await page.getByRole('button', { name: 'Edit demo-model' }).click()
    const provider = page.getByRole('form', { name: 'Edit demo-model' })
    await provider.getByLabel('Display name').fill('The demo model')
    await provider.getByRole('button', { name: 'Save' }).click()
    await page.getByRole('status').filter({ hasText: 'Saved demo-model.' }).waitFor()
    expect((await api('GET', '/providers?name=demo-model')).body.providers[0]).toMatchObject({ display_name: 'The demo model', default_model: 'demo-1' })
  })

  it('keys, secrets and members: create a key (its secret shown once) and revoke it, set and delete a secret, invite, re-role and remove a member', async () => {
    await page.goto(`${dev.url}/#/keys`)
    await page.getByRole('heading', { name: 'API keys', exact: true }).waitFor()
    await page.getByRole('button', { name: 'Create API key' }).click()
    const keyForm = page.getByRole('form', { name: 'Create API key' })
    await keyForm.getByLabel('Label').fill('ci-bot')
    await keyForm.getByLabel('Permission set').selectOption('submit_observe')
    await keyForm.getByRole('button', { name: 'Create' }).click()
    const secret = (await page.getByTestId('new-key').textContent())!
    expect((await fetch(`${dev.url}/v1/me`, { headers: { authorization: `Bearer ${secret}` } })).status).toBe(200)
    const row = page.getByRole('table', { name: 'API keys' }).locator('tbody tr', { hasText: 'ci-bot' })
    await row.getByRole('button', { name: 'Revoke' }).click()
    await row.waitFor({ state: 'detached' })
    expect((await fetch(`${dev.url}/v1/me`, { headers: { authorization: `Bearer ${secret}` } })).status).toBe(401)

    await page.goto(`${dev.url}/#/secrets`)
    await page.getByRole('button', { name: 'Set secret' }).click()
    const secretForm = page.getByRole('form', { name: 'Set secret' })
    await secretForm.getByLabel('Name').fill('tenant_id')
    await secretForm.getByLabel('Value').fill('SECRET-tenant-42')
    await secretForm.getByRole('button', { name: 'Create' }).click()
    const secretRow = page.getByRole('table', { name: 'Secrets' }).locator('tbody tr', { hasText: 'tenant_id' })
    await secretRow.waitFor()
    expect(await page.content()).not.toContain('SECRET-tenant-42')
    await secretRow.getByRole('button', { name: 'Delete' }).click()
    await secretRow.waitFor({ state: 'detached' })
    expect((await api('GET', '/secrets')).body.secrets.map((x: { name: string }) => x.name)).not.toContain('tenant_id')

    await page.goto(`${dev.url}/#/members`)
    await page.getByRole('button', { name: 'Invite member' }).click()
    const invite = page.getByRole('form', { name: 'Invite member' })
    await invite.getByLabel('Email').fill('bob@example.com')
    await invite.getByLabel('Role').selectOption('member')
    await invite.getByRole('button', { name: 'Create' }).click()
    const bob = page.getByRole('table', { name: 'Members' }).locator('tbody tr', { hasText: 'bob@example.com' })
    await bob.getByRole('button', { name: 'Make admin' }).click()
    await bob.getByRole('cell', { name: 'admin', exact: true }).waitFor()
    await bob.getByRole('button', { name: 'Remove' }).click()
    await bob.waitFor({ state: 'detached' })
    expect(await serious(page)).toEqual([])
  })

  it('runs caps test cases from the policies page against the text being edited', async () => {
    await page.goto(`${dev.url}/#/policies`)
    await page.getByRole('heading', { name: 'Policies', exact: true }).waitFor()
    await page.getByRole('textbox', { name: 'caps test cases' }).click()
    await page.keyboard.insertText(
      'cases:\n  - name: elsewhere is denied\n    request: {method: GET, url: "https://example.com/"}\n    expect: {decision: deny}\n' +
        '  - name: elsewhere is allowed (wrong)\n    request: {method: GET, url: "https://example.com/"}\n    expect: {decision: allow}\n',
    )
    await page.getByRole('button', { name: 'Run cases' }).click()
    await expect.poll(() => page.getByTestId('cases-status').textContent()).toBe('1 passed, 1 failed')
    const results = page.getByRole('list', { name: 'Case results' })
    expect(await results.locator('li').first().textContent()).toMatch(/^pass elsewhere is denied/)
    expect(await results.locator('li').nth(1).textContent()).toMatch(/^FAIL elsewhere is allowed \(wrong\)decision: expected "allow", got "deny"/)
  })

  it('a read_only key sees no create, edit, upload, authorize or delete; the pages logged no CSP violation', async () => {
    const key = await api('POST', '/api-keys', { label: 'viewer', permission_set: 'read_only' })
    expect(key.status).toBe(201)
    const viewer = await browser.page()
    await viewer.page.goto(`${dev.url}/`)
    await viewer.page.getByLabel('API key or session token').fill(key.body.value)
    await viewer.page.getByRole('button', { name: 'Sign in' }).click()
    await viewer.page.getByRole('heading', { name: 'Workspaces', exact: true }).waitFor()
    await viewer.page.goto(`${dev.url}/#/credentials`)
    await viewer.page.getByRole('heading', { name: 'Credentials', exact: true }).waitFor()
    await viewer.page.locator('table, [role="alert"]').first().waitFor()
    expect(await viewer.page.getByRole('button', { name: /^(Create|Authorize|Re-authorize|Delete)/ }).count()).toBe(0)
    for (const hash of ['packs', 'roles', 'providers']) {
      await viewer.page.goto(`${dev.url}/#/${hash}`)
      await viewer.page.locator('h1').waitFor()
      await viewer.page.locator('table, [role="alert"]').first().waitFor()
      expect(await viewer.page.getByRole('button', { name: /^(Create|Upload|Edit|Clone|Archive|Delete)/ }).count(), hash).toBe(0)
    }
    expect((await api('POST', '/credentials', { name: 'x', provider: 'github', kind: 'static_token', token: 't' }, key.body.value)).status).toBe(403)
    expect([...errors.cspViolations, ...viewer.cspViolations]).toEqual([])
    expect([...errors.consoleErrors, ...viewer.consoleErrors].filter((e) => !/status of (401|403)/.test(e))).toEqual([])
  })
})
