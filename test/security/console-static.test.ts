// Class: the console's static files name nothing outside dist/console (issue 14's "every error the
// envelope" over the files served at `/`). An attacker on the API port tries to read the install's
// own files (package.json, the server's code, the data dir beside it) or the host's through the
// static route: dot segments raw and percent-encoded (once and twice), overlong UTF-8 dots,
// backslashes, NUL, absolute and doubled slashes, dot files, and URLs far past the limits. Every
// answer is the /v1 error envelope (404, or 400/414/431 where the request itself is refused), never
// a file outside dist/console, never a 5xx; the real console files are still served afterwards.
// Needs `npm run build` (the console is dist/console/), as test/console does.
import { existsSync, readFileSync } from 'node:fs'
import { connect, type AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CONSOLE_DIR } from '../../src/server/console.js'
import { createHarness, type Harness } from '../server/harness.js'

/** Sends the request target exactly as written (no client normalisation) and reads the whole answer. */
function raw(port: number, target: string): Promise<{ status: number; head: string; body: string }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(`GET ${target} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n`, 'latin1'))
    let text = ''
    socket.setEncoding('latin1')
    socket.on('data', (c) => (text += c))
    socket.on('error', () => {})
    socket.on('close', () => {
      const cut = text.indexOf('\r\n\r\n')
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), head: text.slice(0, cut), body: text.slice(cut + 4) })
    })
    socket.setTimeout(5_000, () => socket.destroy())
  })
}

const TRAVERSALS = [
  '/../package.json', '/../../package.json', '/assets/../../package.json', '/assets/../../../../../../etc/passwd',
  '/%2e%2e/package.json', '/%2E%2E/%2E%2E/package.json', '/assets/%2e%2e/%2e%2e/package.json', '/assets/..%2f..%2fpackage.json',
  '/assets/..%2F..%2F..%2Fetc%2Fpasswd', '/%252e%252e/package.json', '/assets/%252e%252e%252f%252e%252e%252fpackage.json',
  '/%c0%ae%c0%ae/package.json', '/..%c0%afpackage.json', '/..\\..\\package.json', '/assets\\..\\..\\package.json', '/%5c..%5c..%5cpackage.json',
  '//etc/passwd', '///etc/passwd', '/index.html%00.js', '/index.html\0', '/%00', '/assets/%00../../package.json',
  '/.env', '/.git/config', '/assets/.htaccess', '/dist/server/index.js', '/src/server/console.ts', '/etc/passwd', '/proc/self/environ',
  '/index.html/..', '/index.html/../../package.json', '/./index.html/../../package.json', '/assets/./../../package.json',
  `/assets/${'../'.repeat(200)}etc/passwd`, `/${'%2e%2e/'.repeat(500)}package.json`,
]

describe('console static files: nothing outside dist/console', () => {
  let h: Harness
  let port: number
  const pkg = readFileSync(new URL('../../package.json', import.meta.url), 'utf8')
  beforeAll(async () => {
    expect(existsSync(`${CONSOLE_DIR}/index.html`), 'run `npm run build` first: the console is dist/console/').toBe(true)
    h = await createHarness()
    await h.app.listen({ port: 0, host: '127.0.0.1' })
    port = (h.app.server.address() as AddressInfo).port
  })
  afterAll(() => h?.close())

  /** The answer is the envelope with a 4xx, and no byte of the files it must not name. */
  const refused = (target: string, a: { status: number; body: string }) => {
    expect(a.status, target).toBeGreaterThanOrEqual(400)
    expect(a.status, target).toBeLessThan(500)
    expect(a.body, target).not.toContain('"name": "corral"')
    expect(a.body, target).not.toMatch(/root:.*:0:0:/)
    expect(a.body, target).not.toContain(pkg.slice(0, 60))
    const envelope = JSON.parse(a.body) as { error?: { code?: unknown; request_id?: unknown } }
    expect(typeof envelope.error?.code, target).toBe('string')
    expect(String(envelope.error?.request_id), target).toMatch(/^req_/)
  }

  it.each(TRAVERSALS)('%s → the envelope, no file outside dist/console', async (target) => {
    refused(target, await raw(port, target))
  })

  it('huge URLs (path and query past the header limit) → the envelope, and serve answers afterwards', async () => {
    for (const target of [`/${'a'.repeat(20_000)}`, `/assets/${'%2e%2e/'.repeat(4_000)}`, `/index.html?${'q'.repeat(70_000)}`]) {
      const a = await raw(port, target)
      expect(a.status, target.slice(0, 40)).toBeGreaterThanOrEqual(400)
      expect(a.status, target.slice(0, 40)).toBeLessThan(500)
      if (a.body) expect(typeof (JSON.parse(a.body) as { error?: { code?: unknown } }).error?.code).toBe('string')
    }
    const page = await raw(port, '/')
    expect(page.status).toBe(200)
    expect(page.body).toContain('<div id="root">')
  })

  it('the real files are still served, with the console headers', async () => {
    const index = await raw(port, '/index.html')
    expect(index.status).toBe(200)
    expect(index.head.toLowerCase()).toContain('content-security-policy:')
    const asset = /src="(\/assets\/[^"]+\.js)"/.exec(index.body)?.[1]
    expect(asset).toBeDefined()
    expect((await raw(port, asset!)).status).toBe(200)
  })
})
