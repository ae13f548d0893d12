// The web console in a real browser (Debian chromium through playwright-core) against a real
// `corral dev` (serve + the fake model + the demo role): sign in, the workspaces list, the CSP,
// accessibility (axe: no serious or critical violations) and keyboard navigation of the main nav.
// Needs `npm run build` (the console is dist/console/).
import { mkdtempSync, rmSync } from 'node:fs'
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
  const api = async (method: string, path: string, body?: unknown, token = dev.adminKey) => {
    const res = await fetch(`${dev.url}/v1${path}`, {
      method, headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    })
    return { status: res.status, body: (await res.json()) as any }
  }
  beforeAll(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'corral-console-'))
    ;[dev, browser] = await Promise.all([startDev(join(tmp, 'data'), { XDG_CONFIG_HOME: join(tmp, 'config') }, ['--runtime', 'process']), launchBrowser()])
  })
  afterAll(async () => {
    await browser?.close()
    await dev?.stop()
    rmSync(tmp, { recursive: true, force: true })
  })

  it('serves the console at / with a strict CSP, and an unknown path is the API 404 envelope', async () => {
    const page = await fetch(`${dev.url}/`)
    expect(page.status).toBe(200)
    expect(page.headers.get('content-type')).toMatch(/^text\/html/)
    const csp = page.headers.get('content-security-policy') ?? ''
    expect(csp).toContain("script-src 'self'")
    expect(csp).not.toContain('unsafe-inline')
    expect(csp).not.toContain('unsafe-eval')
    expect(await page.text()).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/)
    const missing = await fetch(`${dev.url}/no-such-page`)
    expect(missing.status).toBe(404)
    expect(((await missing.json()) as any).error.code).toBe('not_found')
  })

  it('signs in with an API key and lists workspaces, filterable by state', async () => {
    const submitted = await api('POST', '/tasks', { role_name: 'demo', description: 'say hello' })
    expect(submitted.status, JSON.stringify(submitted.body)).toBe(202)
    const { page, cspViolations, consoleErrors } = await browser.page()
    await page.goto(`${dev.url}/`)
    await page.getByLabel('API key or session token').fill('crl_not_a_key')
    await page.getByRole('button', { name: 'Sign in' }).click()
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('unauthenticated')
    await page.getByLabel('API key or session token').fill(dev.adminKey)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('heading', { name: 'Workspaces' }).waitFor()
    await page.getByRole('link', { name: submitted.body.workspace_id }).waitFor()
    await page.getByLabel('State').selectOption('archived')
    await page.getByText('No workspaces match.').waitFor()
    expect(await page.getByRole('link', { name: submitted.body.workspace_id }).count()).toBe(0)
    expect(await axeFindings(page)).toEqual([])
    expect(cspViolations).toEqual([])
    expect(consoleErrors.filter((e) => !/401|Unauthorized/i.test(e))).toEqual([])
  })
})
