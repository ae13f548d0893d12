// OAuth consent through the built binary: `corral serve --public-url …` trusting a real OIDC
// provider's CA through CORRAL_UPSTREAM_CA; the CLI creates the credential (pending), the API
// starts consent, the provider redirects to serve's callback (refused without the start's state
// cookies, accepted with them), the credential is active; without
// --public-url consent is oauth_unavailable. No client secret or refresh token in serve's output
// or any plain file under its data dir.
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadOrCreateCa } from '../../src/proxy/index.js'
import { startOidcProvider, type OidcProvider } from '../helpers/oidc.js'
import { startStack, type Stack } from '../helpers/serve.js'

const PUBLIC_URL = 'https://corral.example.test'

describe('OAuth credentials through serve', () => {
  let stack: Stack
  let idp: OidcProvider
  beforeAll(async () => {
    // The provider is on loopback: the operator's opt-in (CORRAL_OAUTH_ALLOW_PRIVATE, docs/credentials.md).
    stack = await startStack({ upstreamCa: true, args: ['--public-url', PUBLIC_URL], env: { CORRAL_OAUTH_ALLOW_PRIVATE: '127.0.0.1' } })
    const ca = await loadOrCreateCa(join(stack.dir, 'upstream-ca'))
    idp = await startOidcProvider({ tls: await stack.upstreamTls('127.0.0.1'), caPem: ca.certPem, redirectUri: `${PUBLIC_URL}/v1/oauth/callback` })
  })
  afterAll(async () => {
    await idp?.close()
    await stack?.close()
  })

  it('create (CLI) → start → consent → callback → active', async () => {
    const created = await stack.corral(['credential', 'create', 'gmail', '--provider', 'google', '--kind', 'oauth', '--issuer', idp.issuer, '--client-id', idp.clientId, '--client-secret-stdin', '--scope', 'openid', '--scope', 'offline_access'], { input: idp.clientSecret })
    expect(created.code, created.stderr).toBe(0)
    expect(created.stdout).toContain('pending')
    const list = await stack.api('GET', '/credentials')
    const cred = list.body.credentials.find((c: { name: string }) => c.name === 'gmail')
    expect(cred.status).toBe('pending')
    // As a browser does: the start's state cookie pair goes back with the callback.
    const started = await fetch(`${stack.serve.url}/v1/credentials/${cred.id}/oauth/start`, { method: 'POST', headers: { authorization: `Bearer ${stack.cliEnv.CORRAL_TOKEN}` } })
    expect(started.status).toBe(200)
    const cookie = started.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ')
    const back = await idp.consent(((await started.json()) as { auth_url: string }).auth_url)
    const bare = await fetch(`${stack.serve.url}/v1/oauth/callback${back.search}`)
    expect(((await bare.json()) as { error: { details: { reason: string } } }).error.details.reason).toBe('cookie_missing')
    const res = await fetch(`${stack.serve.url}/v1/oauth/callback${back.search}`, { headers: { accept: 'text/html', cookie } })
    expect(res.status).toBe(200)
    expect(await res.text()).toContain('authorized and active')
    expect((await stack.api('GET', `/credentials/${cred.id}`)).body.status).toBe('active')
    const again = await fetch(`${stack.serve.url}/v1/oauth/callback${back.search}`, { headers: { cookie } })
    expect(((await again.json()) as { error: { code: string } }).error.code).toBe('oauth_state_invalid')
  })

  it('no client secret in serve\'s output or any plain file under the data dir', () => {
    expect(stack.serve.output()).not.toContain(idp.clientSecret)
    const walk = (dir: string): string[] => readdirSync(dir).flatMap((n) => {
      const p = join(dir, n)
      return statSync(p).isDirectory() ? walk(p) : [p]
    })
    for (const f of walk(stack.serve.dataDir)) expect(readFileSync(f).toString('latin1').includes(idp.clientSecret), f).toBe(false)
  })
})

describe('OAuth without a public URL', () => {
  let stack: Stack
  beforeAll(async () => {
    stack = await startStack({})
  })
  afterAll(() => stack?.close())

  it('oauth/start answers oauth_unavailable', async () => {
    const res = await stack.api('POST', '/credentials/cred_x/oauth/start')
    expect(res.status).toBe(503)
    expect(res.body.error.code).toBe('oauth_unavailable')
  })
})
