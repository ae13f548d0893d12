// Debian's chromium driven by playwright-core (no browser download): the console suites' browser.
// Suites skip with one line where /usr/bin/chromium is missing — unless CORRAL_TEST_REQUIRE_CHROMIUM=1
// (set by .ci/run, which installs it), where a missing browser fails them.
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium, type BrowserContext, type Page } from 'playwright-core'

export const CHROMIUM = process.env.CORRAL_TEST_CHROMIUM ?? '/usr/bin/chromium'

/** Whether browser suites run here; throws under CORRAL_TEST_REQUIRE_CHROMIUM=1 when they cannot. */
export function chromiumAvailable(): boolean {
  const ok = existsSync(CHROMIUM)
  if (!ok && process.env.CORRAL_TEST_REQUIRE_CHROMIUM === '1') {
    throw new Error(`${CHROMIUM} is required (CORRAL_TEST_REQUIRE_CHROMIUM=1) but not installed: apt-get install chromium`)
  }
  if (!ok) console.log(`${CHROMIUM} not installed, skipping the console browser suites`)
  return ok
}

export interface TestBrowser {
  context: BrowserContext
  /** A new tab (its own sessionStorage, so signed out); `cspViolations` collects what the page's CSP refused. */
  page(): Promise<{ page: Page; cspViolations: string[]; consoleErrors: string[] }>
  close(): Promise<void>
}

/**
 * Headless chromium with a fresh profile and everything that would call out switched off (the
 * machine's network is loopback only; background fetches would only flood refusals).
 * `ignoreHttpsErrors`: accept the certificates of test CAs (a loopback OAuth provider's).
 */
export async function launchBrowser(opts: { ignoreHttpsErrors?: boolean } = {}): Promise<TestBrowser> {
  const profile = mkdtempSync(join(tmpdir(), 'corral-chromium-'))
  // A persistent context is how playwright takes --user-data-dir: a fresh temp profile per run.
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 860 },
    // Only for suites whose pages visit a loopback HTTPS server of a test CA (an OAuth provider).
    ignoreHTTPSErrors: opts.ignoreHttpsErrors ?? false,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync',
    ],
  })
  return {
    context,
    async page() {
      const page = await context.newPage()
      // Well inside vitest's 30 s test timeout, so a wait that fails names what it waited for.
      page.setDefaultTimeout(15_000)
      const cspViolations: string[] = []
      const consoleErrors: string[] = []
      page.on('console', (m) => {
        if (m.type() !== 'error') return
        if (/Content.Security.Policy/i.test(m.text())) cspViolations.push(m.text())
        else consoleErrors.push(m.text())
      })
      page.on('pageerror', (e) => consoleErrors.push(String(e)))
      return { page, cspViolations, consoleErrors }
    },
    async close() {
      await context.close()
      rmSync(profile, { recursive: true, force: true })
    },
  }
}
