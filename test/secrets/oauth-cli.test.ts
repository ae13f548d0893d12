// `corral credential authorize` in-process against the real app on a socket and a real OIDC
// provider: it listens on a loopback port, starts consent bound to it, hands the authorize URL to
// the browser (BROWSER: a script that plays the user — consent at the provider, the redirect to
// corral's callback, and on to the loopback address the callback names), then finishes with its
// binding and reports the credential active; `--json` prints the record; a browser that never
// reaches the loopback port leaves it pending (timeout); a static credential is refused with one
// line and exit 2.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import CredentialAuthorize from '../../src/commands/credential/authorize.js'
import { LeafMinter, loadOrCreateCa } from '../../src/proxy/index.js'
import { OAuthHttp, Sealer } from '../../src/secrets/index.js'
import { runCommand } from '../commands/run-command.js'
import { startOidcProvider, type OidcProvider } from '../helpers/oidc.js'
import { createHarness, type Harness } from '../server/harness.js'

const PUBLIC_URL = 'https://corral.example.test'

describe('corral credential authorize', () => {
  let h: Harness
  let idp: OidcProvider
  let http: OAuthHttp
  let dir: string
  let user: Server
  let env: Record<string, string>
  let org: Awaited<ReturnType<Harness['newOrg']>>
  const opened: string[] = []
  const outcomes: string[] = [] // the page each browser saw at the end
  let browserStops = false // the browser is on another machine: the callback's redirect goes nowhere

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'corral-oauth-cli-'))
    h = await createHarness({ sealer: new Sealer(Buffer.alloc(32, 3)) })
    const ca = await loadOrCreateCa(dir)
    idp = await startOidcProvider({ tls: await new LeafMinter(ca).pemFor('127.0.0.1'), caPem: ca.certPem, redirectUri: `${PUBLIC_URL}/v1/oauth/callback` })
    http = new OAuthHttp({ extraCaPem: [ca.certPem], allowPrivate: ['127.0.0.1/32'] }) // the provider is on loopback: the operator's opt-in
    h.deps.oauth = { publicUrl: PUBLIC_URL, http }
    await h.app.listen({ port: 0, host: '127.0.0.1' })
    org = await h.newOrg()
    // The "user at a browser": consents at the provider and follows the redirect to corral's callback.
    user = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x').searchParams.get('u') ?? ''
      opened.push(url)
      res.end()
      void idp.consent(url)
        .then((back) => h.inject('GET', `/v1/oauth/callback${back.search}`))
        .then(async (cb) => {
          if (cb.status !== 303) return void outcomes.push(`callback ${cb.status}`)
          if (browserStops) return void outcomes.push('stopped')
          outcomes.push(await (await fetch(String(cb.headers.location))).text())
        })
    })
    await new Promise<void>((r) => user.listen(0, '127.0.0.1', r))
    const browser = join(dir, 'browser.sh')
    writeFileSync(browser, `#!/bin/sh\nexec curl -s -G --data-urlencode "u=$1" http://127.0.0.1:${(user.address() as AddressInfo).port}/open\n`)
    chmodSync(browser, 0o755)
    env = { CORRAL_API_URL: `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`, CORRAL_TOKEN: org.ownerKey, XDG_CONFIG_HOME: dir, BROWSER: browser }
    const created = await h.inject('POST', '/v1/credentials', {
      token: org.ownerKey,
      body: { name: 'gmail', provider: 'google', kind: 'oauth', issuer: idp.issuer, client_id: idp.clientId, client_secret: idp.clientSecret, scopes: ['openid', 'offline_access'] },
    })
    expect(created.status).toBe(201)
    await h.inject('POST', '/v1/credentials', { token: org.ownerKey, body: { name: 'gh', provider: 'github', kind: 'static_token', token: 'ghp_x' } })
  })
  afterAll(async () => {
    user?.close()
    await h?.close()
    await http?.close()
    await idp?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('a browser that never comes back to the loopback port leaves the credential pending: timeout, one line', async () => {
    browserStops = true
    const r = await runCommand(CredentialAuthorize, ['gmail', '--timeout', '5'], env)
    browserStops = false
    expect(r.exitCode).toBe(1)
    expect(r.stderr).toContain('timed out after 5s waiting for consent on gmail')
    expect(outcomes.at(-1)).toBe('stopped')
    const now = await h.inject('GET', '/v1/credentials?name=gmail', { token: org.ownerKey })
    expect(JSON.stringify(now.body)).toContain('"status":"pending"')
  })

  it('opens the browser, finishes through its loopback port and reports the credential active (again on a re-consent)', async () => {
    for (const round of [1, 2]) {
      const r = await runCommand(CredentialAuthorize, ['gmail', '--timeout', '60', ...(round === 2 ? ['--json'] : [])], env)
      expect(r.exitCode, r.stderr).toBe(0)
      expect(opened).toHaveLength(round + 1)
      expect(r.stderr).toContain(opened[round])
      expect(outcomes.at(-1)).toContain('The credential gmail is authorized and active.')
      if (round === 1) {
        expect(r.stderr).toContain('Credential gmail is authorized (active).')
        expect(r.stderr).not.toContain('\r') // not a terminal: plain lines
      } else {
        const out = JSON.parse(r.stdout) as { auth_url: string; credential: { status: string; name: string } }
        expect(out.auth_url.startsWith(`${idp.issuer}/auth?`)).toBe(true)
        expect(out.credential).toMatchObject({ name: 'gmail', status: 'active' })
      }
    }
  })

  it('a static credential has no consent: one line, exit 2', async () => {
    const r = await runCommand(CredentialAuthorize, ['gh', '--no-browser'], env)
    expect(r.exitCode).toBe(2)
    expect(r.stderr.trim().split('\n')).toHaveLength(1)
    expect(r.stderr).toContain('only kind oauth has a consent flow')
  })
})
