// The web console in a real browser (Debian chromium through playwright-core) against a real
// `corral dev` (serve + the fake model + the demo role): sign in; submit a task and watch its agent
// events and policy decisions arrive live; the audit explorer with a filter; a chart rendered; a
// policy edited with a lint error at its line; a read_only key sees no write buttons; the CSP;
// axe (no serious or critical violations) on each main page and keyboard navigation of the nav.
// Needs `npm run build` (the console is dist/console/).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { AxeBuilder } from '@axe-core/playwright'
import type { Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startDev, type RunningDev } from '../helpers/dev.js'
import { chromiumAvailable, launchBrowser, type TestBrowser } from './browser.js'

const available = chromiumAvailable()

async function axeFindings(page: Page): Promise<string[]> {
  const result = await new AxeBuilder({ page }).analyze()
  return result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`)
}

describe.runIf(available)('web console (chromium)', () => {
  let tmp: string
  let dev: RunningDev
  let browser: TestBrowser
  let page: Page
  let pageErrors: { cspViolations: string[]; consoleErrors: string[] }
  let workspaceId: string
  const api = async (method: string, path: string, body?: unknown, token = dev.adminKey) => {
    const res = await fetch(`${dev.url}/v1${path}`, {
      method, headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    })
    return { status: res.status, body: (await res.json()) as any }
  }
  const signIn = async (p: Page, token: string) => {
    await p.goto(`${dev.url}/`)
    await p.getByLabel('API key or session token').fill(token)
    await p.getByRole('button', { name: 'Sign in' }).click()
    await p.getByRole('heading', { name: 'Workspaces', exact: true }).waitFor()
  }
  // The roles page lists the kinds' roles (claude-code, codex, …) before demo: the policy walk-throughs name demo's.
  const demoRoleId = async (): Promise<string> => (await api('GET', '/agent-roles?name=demo')).body.agent_roles[0].id
  const open = async (hash: string, heading: string) => {
    await page.goto(`${dev.url}/#/${hash}`)
    await page.getByRole('heading', { name: heading, exact: true }).waitFor()
  }

  beforeAll(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'corral-console-'))
    ;[dev, browser] = await Promise.all([startDev(join(tmp, 'data'), { XDG_CONFIG_HOME: join(tmp, 'config') }, ['--runtime', 'process']), launchBrowser()])
    const opened = await browser.page()
    page = opened.page
    pageErrors = opened
  })
  afterAll(async () => {
    await browser?.close()
    await dev?.stop()
    rmSync(tmp, { recursive: true, force: true })
  })

  it('serves the console at / with a strict CSP, and an unknown path is the API 404 envelope', async () => {
    const res = await fetch(`${dev.url}/`)
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toMatch(/^text\/html/)
    const csp = res.headers.get('content-security-policy') ?? ''
    expect(csp).toContain("script-src 'self'")
    expect(csp).toContain("default-src 'none'")
    expect(csp).not.toContain('unsafe-inline')
    expect(csp).not.toContain('unsafe-eval')
    expect(await res.text()).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/)
    const missing = await fetch(`${dev.url}/no-such-page`)
    expect(missing.status).toBe(404)
    expect(((await missing.json()) as any).error.code).toBe('not_found')
  })

  it('refuses a bad token with the API message, then signs in with the API key', async () => {
    await page.goto(`${dev.url}/`)
    await page.getByLabel('API key or session token').fill('crl_not_a_key')
    await page.getByRole('button', { name: 'Sign in' }).click()
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('unauthenticated')
    await page.getByLabel('API key or session token').fill(dev.adminKey)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('heading', { name: 'Workspaces', exact: true }).waitFor()
    expect(await axeFindings(page)).toEqual([])
  })

  it('submits a task and shows its agent events and policy decisions arriving live, then its snapshot files', async () => {
    // corral dev seeds a role per agent kind besides the demo role; this walk-through runs the demo's reference agent.
    await page.getByLabel('Role for the new task').selectOption('demo')
    // corral dev seeds a role per agent kind besides the demo role; this walk-through runs the demo's reference agent.
    await page.getByLabel('Role for the new task').selectOption('demo')
    await page.getByLabel('Task description').fill('say hello')
    await page.getByRole('button', { name: 'Submit task' }).click()
    await page.waitForURL(/#\/workspaces\/ws_/)
    workspaceId = decodeURIComponent(/#\/workspaces\/([^/?]+)/.exec(page.url())![1]!)
    const timeline = page.getByRole('list', { name: 'Workspace events' })
    await timeline.locator('li[data-event-type="policy_decision"][data-decision="allow"]').first().waitFor({ timeout: 20_000 })
    await timeline.locator('li[data-event-type="tool_call"]').first().waitFor({ timeout: 20_000 })
    await timeline.locator('li[data-event-type="task_completed"]').waitFor({ timeout: 20_000 })
    expect(await timeline.locator('li[data-event-type="policy_decision"]').first().textContent()).toMatch(/allow.*POST 127\.0\.0\.1\/v1\/messages.*model.*debits output_tokens=\d+/)
    expect(await page.locator('[data-stream-state]').getAttribute('data-stream-state')).toBe('live')
    // Every decision the API has for the workspace is on the page, none twice.
    const decisions = (await api('GET', `/workspaces/${workspaceId}/audit?filter=event_type=policy_decision&limit=100`)).body.events
    await expect.poll(() => timeline.locator('li[data-event-type="policy_decision"]').count()).toBe(decisions.length)
    await page.getByRole('table', { name: 'Snapshot files' }).getByText('hello.md').waitFor({ timeout: 20_000 })
    expect(await axeFindings(page)).toEqual([])
  })

  it('opens a snapshot file as text, downloads it, and downloads all of /data as a tar', async () => {
    const files = page.getByRole('table', { name: 'Snapshot files' })
    await files.getByRole('button', { name: 'hello.md' }).click()
    const shown = page.getByLabel('Contents of hello.md')
    await shown.waitFor()
    const res = await fetch(`${dev.url}/v1/workspaces/${workspaceId}/snapshot/content?path=hello.md`, { headers: { authorization: `Bearer ${dev.adminKey}` } })
    expect(res.status).toBe(200)
    const bytes = Buffer.from(await res.arrayBuffer())
    expect(await shown.textContent()).toBe(bytes.toString('utf8'))
    expect(await axeFindings(page)).toEqual([])
    let downloading = page.waitForEvent('download')
    await page.getByRole('button', { name: 'Download hello.md' }).click()
    let saved = await downloading
    expect(saved.suggestedFilename()).toBe('hello.md')
    expect(readFileSync((await saved.path())!)).toEqual(bytes)
    downloading = page.waitForEvent('download')
    await page.getByRole('button', { name: 'Download all of /data (.tar)' }).click()
    saved = await downloading
    expect(saved.suggestedFilename()).toBe(`${workspaceId}.tar`)
    const tar = readFileSync((await saved.path())!)
    // A tar: 512-byte records; walk its headers (name, octal size) to hello.md and compare its body.
    expect(tar.length % 512).toBe(0)
    const members = new Map<string, Buffer>()
    for (let at = 0; at + 512 <= tar.length && tar[at] !== 0; ) {
      const header = tar.subarray(at, at + 512)
      expect(header.subarray(257, 262).toString()).toBe('ustar')
      const size = parseInt(header.subarray(124, 136).toString().replace(/\0.*$/, '').trim() || '0', 8)
      members.set(header.subarray(0, 100).toString().replace(/\0.*$/s, '').replace(/^\.\//, ''), tar.subarray(at + 512, at + 512 + size))
      at += 512 + Math.ceil(size / 512) * 512
    }
    expect(members.get('hello.md')).toEqual(bytes)
    await page.getByRole('button', { name: 'Close file' }).click()
  })

  it('the audit explorer applies a filter from the page, opens a row, picks columns, exports the query and tails it live', async () => {
    await open('audit', 'Audit explorer')
    await page.getByLabel('Column', { exact: true }).selectOption('decision')
    await page.getByLabel('Values (comma-separated)').fill('allow')
    await page.getByRole('button', { name: 'Add filter' }).click()
    await page.waitForURL(/filter=decision%3Dallow/)
    const table = page.getByRole('table', { name: 'Audit events' })
    await expect.poll(() => table.locator('tbody tr').count()).toBeGreaterThan(0)
    const shown = await table.locator('tbody td.allow, tbody td.deny').allTextContents()
    expect(new Set(shown)).toEqual(new Set(['allow']))
    await table.locator('tbody tr').first().getByRole('button').click()
    const drawer = page.getByRole('dialog')
    expect(await drawer.getByLabel('Event JSON').textContent()).toContain('"decision": "allow"')
    await page.keyboard.press('Escape')
    await drawer.waitFor({ state: 'detached' })
    await page.getByRole('button', { name: /^Columns/ }).click()
    await page.getByRole('checkbox', { name: 'latency_ms' }).check()
    await table.getByRole('columnheader', { name: 'latency_ms' }).waitFor()
    expect(await axeFindings(page)).toEqual([])
    // Export of the current query: every matching event, as the API has them.
    const downloading = page.waitForEvent('download')
    await page.getByRole('button', { name: 'Export NDJSON' }).click()
    const exported = readFileSync((await (await downloading).path())!, 'utf8').trim().split('\n').map((l) => JSON.parse(l).id)
    const matching = (await api('GET', '/audit?filter=decision=allow&limit=10000')).body.events.map((e: { id: string }) => e.id)
    expect(exported).toEqual(matching)
    // Live tail with the same filter: a new task's decisions appear at the top.
    await page.getByRole('checkbox', { name: 'Live tail' }).check()
    const next = await api('POST', '/tasks', { role_name: 'demo', description: 'tail me' })
    expect(next.status).toBe(202)
    await table.locator('tbody tr', { hasText: next.body.workspace_id }).first().waitFor({ timeout: 20_000 })
    expect(new Set(await table.locator('tbody td.allow, tbody td.deny').allTextContents())).toEqual(new Set(['allow']))
    await page.getByRole('checkbox', { name: 'Live tail' }).uncheck()
  })

  it('the audit explorer pages with the cursor, narrows to a time range, and exports the shown columns as CSV', async () => {
    await open('audit?limit=25', 'Audit explorer')
    const table = page.getByRole('table', { name: 'Audit events' })
    await expect.poll(() => table.locator('tbody tr').count()).toBe(25)
    const firstOfPage1 = await table.locator('tbody tr').first().textContent()
    await page.getByRole('button', { name: 'Next page' }).click()
    await page.getByText('page 2', { exact: true }).waitFor()
    await expect.poll(() => table.locator('tbody tr').first().textContent()).not.toBe(firstOfPage1)
    await page.getByRole('button', { name: 'First page' }).click()
    await page.getByText('page 1', { exact: true }).waitFor()
    await open('audit?filter=event_type%3Dtask_submitted', 'Audit explorer')
    await expect.poll(() => table.locator('tbody tr').count()).toBeGreaterThan(0)
    const downloading = page.waitForEvent('download')
    await page.getByRole('button', { name: 'Export CSV' }).click()
    const csv = readFileSync((await (await downloading).path())!, 'utf8').trimEnd().split('\r\n')
    const matching = (await api('GET', '/audit?filter=event_type=task_submitted&limit=10000')).body.events
    // The CSV has the columns shown, in their order.
    const shownColumns = await table.getByRole('columnheader').allTextContents()
    expect(csv[0]).toBe(shownColumns.join(','))
    const at = shownColumns.indexOf('workspace_id')
    expect(csv.slice(1).map((l) => l.split(',')[at])).toEqual(matching.map((e: { workspace_id: string }) => e.workspace_id))
    await page.getByRole('status').filter({ hasText: `Exported ${matching.length} events.` }).waitFor()
    await page.getByLabel('From').fill('2099-01-01T00:00')
    await page.waitForURL(/from=2099/)
    await page.getByText('No events match.').waitFor()
  })

  it('renders the stats charts', async () => {
    await open('stats', 'Stats')
    await page.locator('[data-chart="chart-decisions"] .recharts-bar-rectangle').first().waitFor()
    await page.locator('[data-chart="chart-destinations"] .recharts-bar-rectangle').first().waitFor()
    await page.locator('[data-chart="chart-budget"] .recharts-bar-rectangle').first().waitFor()
    expect(await axeFindings(page)).toEqual([])
  })

  it('shows a workspace budget against the role ceilings', async () => {
    await open(`budgets?workspace=${workspaceId}`, 'Budgets')
    const row = page.getByRole('table', { name: 'Budget counters' }).locator('tbody tr', { hasText: 'output_tokens' })
    await row.waitFor()
    expect(await row.textContent()).toMatch(/output_tokens/)
    expect(await axeFindings(page)).toEqual([])
  })

  it('edits a policy and shows the lint error at its line, as you type', async () => {
    await open(`policies?role=${await demoRoleId()}`, 'Policies')
    await expect.poll(() => page.getByTestId('lint-status').textContent()).toMatch(/^valid/)
    const editor = page.getByRole('textbox', { name: /caps\.yaml of role demo/ })
    await editor.click()
    await page.keyboard.press('Control+End')
    await page.keyboard.type('\n- name: broken\n  type: http\n  allow:\n    - domains: [x.example]\n      methods: [FETCH]\n')
    const lines = (await api('GET', '/agent-roles?name=demo')).body.agent_roles[0].capabilities.split('\n').length
    await expect.poll(() => page.getByTestId('lint-status').textContent(), { timeout: 10_000 }).toMatch(/error/)
    const first = await page.getByRole('list', { name: 'Diagnostics' }).locator('li.error').first().textContent()
    const [line] = /^(\d+):(\d+)/.exec(first ?? '')!.slice(1).map(Number)
    expect(line).toBeGreaterThan(lines - 1)
    expect(await page.locator('.cm-lintRange-error').count()).toBeGreaterThan(0)
    expect(await page.getByRole('button', { name: 'Save policy' }).isDisabled()).toBe(true)
    expect(await axeFindings(page)).toEqual([])
  })

  it('pages of keys, members, providers, roles, packs, secrets and credentials list their rows', async () => {
    for (const [hash, heading, text] of [
      ['keys', 'API keys', 'Create API key'], ['members', 'Members', 'Invite member'], ['providers', 'Providers', 'demo-model'],
      ['roles', 'Roles', 'demo'], ['packs', 'Packs', 'Upload a pack'], ['secrets', 'Secrets', 'demo-model-key'], ['credentials', 'Credentials', 'demo-model'],
    ] as const) {
      await open(hash, heading)
      await page.getByText(text, { exact: false }).first().waitFor()
      expect(await axeFindings(page), hash).toEqual([])
    }
  })

  it('the main navigation works from the keyboard', async () => {
    await open('workspaces', 'Workspaces')
    await page.locator('body').focus()
    let focused = ''
    for (let i = 0; i < 40 && focused !== 'Audit'; i++) {
      await page.keyboard.press('Tab')
      focused = await page.evaluate('document.activeElement && document.activeElement.textContent')
    }
    expect(focused).toBe('Audit')
    await page.keyboard.press('Enter')
    await page.getByRole('heading', { name: 'Audit explorer' }).waitFor()
    expect(await page.locator('nav a[aria-current="page"]').textContent()).toBe('Audit')
  })

  it('a read_only key sees no write buttons, and the page logged no CSP violation', async () => {
    const key = await api('POST', '/api-keys', { label: 'viewer', permission_set: 'read_only' })
    expect(key.status).toBe(201)
    const viewer = await browser.page()
    await signIn(viewer.page, key.body.value)
    await viewer.page.getByRole('link', { name: workspaceId }).waitFor()
    expect(await viewer.page.getByRole('button', { name: 'Submit task' }).count()).toBe(0)
    await viewer.page.goto(`${dev.url}/#/workspaces/${workspaceId}`)
    await viewer.page.getByRole('heading', { name: `Workspace ${workspaceId}` }).waitFor()
    await viewer.page.getByTestId('workspace-state').waitFor()
    for (const name of ['Submit follow-up', 'Cancel task', 'Stop', 'Archive']) expect(await viewer.page.getByRole('button', { name }).count(), name).toBe(0)
    await viewer.page.goto(`${dev.url}/#/policies?role=${await demoRoleId()}`)
    await viewer.page.getByRole('heading', { name: 'Policies' }).waitFor()
    await viewer.page.getByRole('textbox', { name: /caps\.yaml of role demo/ }).waitFor()
    expect(await viewer.page.getByRole('button', { name: 'Save policy' }).count()).toBe(0)
    expect(await viewer.page.getByRole('textbox', { name: /caps\.yaml of role demo/ }).getAttribute('contenteditable')).toBe('false')
    for (const hash of ['providers', 'roles', 'keys']) {
      await viewer.page.goto(`${dev.url}/#/${hash}`)
      await viewer.page.locator('h1').waitFor()
      await viewer.page.locator('table, [role="alert"]').first().waitFor()
      expect(await viewer.page.getByRole('button', { name: /^(Create|Archive|Delete|Revoke)/ }).count(), hash).toBe(0)
    }
    // And the API refuses anyway.
    expect((await api('POST', `/workspaces/${workspaceId}/stop`, {}, key.body.value)).status).toBe(403)
    expect([...pageErrors.cspViolations, ...viewer.cspViolations]).toEqual([])
    expect([...pageErrors.consoleErrors, ...viewer.consoleErrors].filter((e) => !/status of (401|403)/.test(e))).toEqual([])
  })

  it('filters workspaces by role and state, and by creator: "created by me" shows the key\'s own, another key\'s none', async () => {
    await open('workspaces', 'Workspaces')
    const filters = page.getByRole('form', { name: 'Filter workspaces' }).getByRole('combobox')
    await filters.nth(1).selectOption('demo')
    await page.waitForURL(/role=demo/)
    await page.getByRole('link', { name: workspaceId }).waitFor()
    await filters.nth(0).selectOption('archived')
    await page.waitForURL(/state=archived/)
    await page.getByText('No workspaces match.').waitFor()
    await open('workspaces?mine=1', 'Workspaces')
    await page.getByRole('link', { name: workspaceId }).waitFor()
    expect(await page.getByRole('checkbox', { name: 'created by me' }).isChecked()).toBe(true)
    const other = await api('POST', '/api-keys', { label: 'other', permission_set: 'full_access' })
    const second = await browser.page()
    await signIn(second.page, other.body.value)
    await second.page.getByRole('link', { name: workspaceId }).waitFor()
    // The filter lives in the URL: the box turns checked once the hash route has changed.
    await second.page.getByRole('checkbox', { name: 'created by me' }).click()
    await second.page.waitForURL(/mine=1/)
    await second.page.getByText('No workspaces match.').waitFor()
    expect(await second.page.getByRole('link', { name: workspaceId }).count()).toBe(0)
  })

  it('a workspace\'s actions from its page: a follow-up, a fork at task 1, stop, archive', async () => {
    await page.goto(`${dev.url}/#/workspaces/${workspaceId}`)
    const state = page.getByTestId('workspace-state')
    await expect.poll(() => state.textContent(), { timeout: 20_000 }).toBe('idle')
    await page.getByRole('textbox', { name: 'Follow-up task' }).fill('say hello again')
    await page.getByRole('button', { name: 'Submit follow-up' }).click()
    const tasks = page.getByRole('table', { name: 'Tasks' })
    await expect.poll(() => tasks.locator('tbody tr').count()).toBe(2)
    await tasks.locator('tbody tr').nth(1).locator('.state-completed').waitFor({ timeout: 20_000 })
    await expect.poll(() => state.textContent(), { timeout: 20_000 }).toBe('idle')
    await page.getByLabel('Fork at task').fill('1')
    await page.getByRole('button', { name: 'Fork', exact: true }).click()
    await page.waitForURL((u) => /#\/workspaces\/ws_/.test(u.hash) && !u.hash.includes(workspaceId))
    const child = decodeURIComponent(/#\/workspaces\/([^/?]+)/.exec(page.url())![1]!)
    await page.getByRole('link', { name: workspaceId }).waitFor()
    expect((await api('GET', `/workspaces/${child}`)).body).toMatchObject({ parent_workspace_id: workspaceId, fork_point_task_count: 1 })
    await page.goto(`${dev.url}/#/workspaces/${workspaceId}`)
    await page.getByRole('button', { name: 'Stop' }).click()
    // An error the page shows would be the failure's message.
    const shown = async () => ((await page.getByRole('alert').count()) ? page.getByRole('alert').first().textContent() : state.textContent())
    await expect.poll(shown, { timeout: 30_000 }).toBe('stopped')
    expect((await api('GET', `/workspaces/${child}`)).body.state).not.toMatch(/^stop/)
    await page.getByRole('button', { name: 'Archive' }).click()
    await expect.poll(() => state.textContent()).toBe('archived')
    await page.getByRole('button', { name: 'Unarchive' }).waitFor()
    expect(await page.getByRole('button', { name: 'Submit follow-up' }).count()).toBe(0)
    expect((await api('GET', `/workspaces/${workspaceId}`)).body.state).toBe('archived')
  })
})
