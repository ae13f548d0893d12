// `npm run docs:console`: the screenshots of docs/console.md, taken from a real `corral dev`
// (serve + the fake model + the demo role) in Debian's chromium, after one task has run. Not a
// test: run it by hand after changing the console (`npm run build` first), and commit the PNGs.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import type { Page } from 'playwright-core'
import { startDev } from '../helpers/dev.js'
import { launchBrowser } from './browser.js'

const OUT = resolve(import.meta.dirname, '../../docs/console')
const BROKEN_LINE = '\n- name: broken\n  type: http\n  allow:\n    - domains: [x.example]\n      methods: [FETCH]\n'

async function main(): Promise<void> {
  mkdirSync(OUT, { recursive: true })
  const tmp = mkdtempSync(join(tmpdir(), 'corral-shots-'))
  const dev = await startDev(join(tmp, 'data'), { XDG_CONFIG_HOME: join(tmp, 'config') }, ['--runtime', 'process'])
  const browser = await launchBrowser()
  try {
    const { page } = await browser.page()
    const shot = async (name: string) => {
      await page.waitForTimeout(300)
      await page.screenshot({ path: join(OUT, `${name}.png`) })
      console.log(`docs/console/${name}.png`)
    }
    const open = async (hash: string, heading: string | RegExp) => {
      await page.goto(`${dev.url}/#/${hash}`)
      await page.getByRole('heading', { name: heading }).first().waitFor()
    }
    await page.goto(`${dev.url}/`)
    await shot('sign-in')
    await page.getByLabel('API key or session token').fill(dev.adminKey)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await submit(page, 'say hello')
    await page.getByRole('table', { name: 'Snapshot files' }).getByText('hello.md').waitFor({ timeout: 30_000 })
    const workspace = page.url()
    await submit(page, 'say hello again')
    await open('workspaces', 'Workspaces')
    await page.locator('tbody tr').nth(1).waitFor()
    await shot('workspaces')
    await page.goto(workspace)
    await page.getByRole('table', { name: 'Snapshot files' }).waitFor()
    await shot('workspace')
    await page.getByRole('table', { name: 'Snapshot files' }).getByRole('button', { name: 'hello.md' }).click()
    await page.getByLabel('Contents of hello.md').scrollIntoViewIfNeeded()
    await shot('workspace-file')
    await open('audit?filter=event_type%3Dpolicy_decision', 'Audit explorer')
    await page.getByRole('table', { name: 'Audit events' }).locator('tbody tr').first().waitFor()
    await shot('audit')
    await page.getByRole('table', { name: 'Audit events' }).locator('tbody tr').first().getByRole('button').click()
    await shot('audit-drawer')
    await open('stats', 'Stats')
    await page.locator('[data-chart="chart-budget"] .recharts-bar-rectangle').first().waitFor()
    await shot('stats')
    await open(`budgets?workspace=${encodeURIComponent(/#\/workspaces\/([^/?]+)/.exec(workspace)![1]!)}`, 'Budgets')
    await page.getByRole('table', { name: 'Budget counters' }).waitFor()
    await shot('budgets')
    await open('policies', 'Policies')
    await page.getByRole('textbox', { name: /caps\.yaml of role/ }).click()
    await page.keyboard.press('Control+End')
    await page.keyboard.type(BROKEN_LINE)
    await page.getByRole('list', { name: 'Diagnostics' }).locator('li.error').first().waitFor()
    await page.locator('.cm-lintRange-error').first().scrollIntoViewIfNeeded()
    await shot('policies')
    await open('keys', 'API keys')
    await shot('keys')
    await open('credentials', 'Credentials')
    await page.getByRole('button', { name: 'Create credential' }).click()
    const form = page.getByRole('form', { name: 'Create credential' })
    await form.getByLabel('Kind').selectOption('oauth')
    await form.getByLabel('Provider').selectOption('google')
    await form.getByLabel('Name').fill('gmail')
    await shot('credentials')
    await open('roles', 'Roles')
    await page.getByRole('button', { name: 'Edit demo' }).click()
    await page.getByRole('form', { name: 'Edit demo' }).waitFor()
    await shot('role-edit')
  } finally {
    await browser.close()
    await dev.stop()
    rmSync(tmp, { recursive: true, force: true })
  }
}

/** A task from the workspaces page; resolves once it has completed on its workspace page. */
async function submit(page: Page, description: string): Promise<void> {
  await page.goto(page.url().replace(/#.*$/, '#/workspaces'))
  await page.getByLabel('Task description').fill(description)
  await page.getByRole('button', { name: 'Submit task' }).click()
  await page.waitForURL(/#\/workspaces\/ws_/)
  await page.getByRole('list', { name: 'Workspace events' }).locator('li[data-event-type="task_completed"]').waitFor({ timeout: 30_000 })
}

await main()
