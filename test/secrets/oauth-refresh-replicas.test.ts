// Two replicas refreshing one OAuth credential at the same moment: two real processes
// (oauth-refresh-child.ts), each with its own store on one shared database (the SQLite file, or one
// PostgreSQL schema), against a real OpenID Connect provider that rotates refresh tokens and
// revokes the whole grant when a rotated refresh token is presented again (oidc-provider's reuse
// detection). The token endpoint is slow, so two refreshes would overlap at the provider. Exactly
// one refresh reaches it; both processes get the same access token; the grant survives (its
// token is honoured, the stored refresh token still refreshes) and the credential stays active.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { createInterface } from 'node:readline'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LeafMinter, loadOrCreateCa } from '../../src/proxy/index.js'
import { NONCE_COOKIE, OAuthConsent, OAuthHttp, OAuthMinter, STATE_COOKIE, Sealer } from '../../src/secrets/index.js'
import { startOidcProvider, type OidcProvider } from '../helpers/oidc.js'
import { storeTarget, testDialects } from '../helpers/dialects.js'

const ROOT = resolve(import.meta.dirname, '../..')
const PUBLIC_URL = 'https://corral.example.test'
const KEY = Buffer.alloc(32, 7)
const audit = { emit: async (e: object) => ({ ...e, id: 'evt', ts: 0 }) } as never

interface ChildResult { tokens: string[]; errors: string[]; refreshes: number }

/** A replica: its own process and store; resolves `ready` once it listens for `go`. */
function replica(target: { url: string; schema?: string }, env: object): { child: ChildProcessWithoutNullStreams; ready: Promise<void>; result: Promise<ChildResult> } {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'test/secrets/oauth-refresh-child.ts'), target.url, target.schema ?? '-'], {
    cwd: ROOT, env: { ...process.env, CORRAL_TEST_OAUTH_CHILD: JSON.stringify(env) },
  })
  let stderr = ''
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()))
  const lines = createInterface({ input: child.stdout })
  let ready!: () => void
  const readyP = new Promise<void>((r) => (ready = r))
  const result = new Promise<ChildResult>((res, rej) => {
    lines.on('line', (l) => (l === 'ready' ? ready() : res(JSON.parse(l) as ChildResult)))
    child.on('exit', (code) => rej(new Error(`replica exited ${code}: ${stderr}`)))
  })
  return { child, ready: Promise.race([readyP, result.then(() => {})]), result }
}

for (const d of testDialects()) describe(`OAuth refresh across two replicas sharing one database [${d.name}]`, () => {
  let dir: string
  let idp: OidcProvider
  let http: OAuthHttp
  let ca: Awaited<ReturnType<typeof loadOrCreateCa>>
  const children: ChildProcessWithoutNullStreams[] = []

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'corral-oauth-replicas-'))
    ca = await loadOrCreateCa(dir)
    idp = await startOidcProvider({ tls: await new LeafMinter(ca).pemFor('127.0.0.1'), caPem: ca.certPem, redirectUri: `${PUBLIC_URL}/v1/oauth/callback` })
    http = new OAuthHttp({ extraCaPem: [ca.certPem], allowPrivate: ['127.0.0.1/32'] })
  })
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL')
    await http?.close()
    await idp?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('one refresh reaches the provider, both replicas get its token, and the grant survives', async () => {
    const store = await d.open()
    const sealer = new Sealer(KEY)
    const org = (await store.orgs.create({ name: `org-${Math.random().toString(36).slice(2)}` }))!
    const actor = { orgId: org.id, userId: 'usr_admin', creatorId: 'usr_admin' }
    const consent = new OAuthConsent({ store, sealer, audit, http, publicUrl: PUBLIC_URL, isOAuthProvider: (p) => p === 'google' })
    const cred = await consent.create(actor, { name: 'gmail', provider: 'google', issuer: idp.issuer, client_id: idp.clientId, client_secret: idp.clientSecret, scopes: ['openid', 'offline_access'] })
    const started = await consent.start(actor, cred.id)
    const back = await idp.consent(started.authUrl)
    await consent.callback(Object.fromEntries(back.searchParams), { [STATE_COOKIE]: started.state, [NONCE_COOKIE]: started.nonce })
    const g0 = (await store.oauth.client(org.id, cred.id))!.generation

    const target = storeTarget(store)!
    const env = { key: KEY.toString('hex'), ca: ca.certPem, orgId: org.id, credId: cred.id, clientSecret: idp.clientSecret }
    const replicas = [replica(target, env), replica(target, env)]
    children.push(...replicas.map((r) => r.child))
    await Promise.all(replicas.map((r) => r.ready))
    idp.tokenDelayMs = 500 // both replicas' refreshes would be at the provider at once
    const before = idp.tokenRequests.refresh_token ?? 0
    for (const r of replicas) r.child.stdin.write('go\n')
    const [a, b] = await Promise.all(replicas.map((r) => r.result))
    idp.tokenDelayMs = 0

    expect(a!.errors, JSON.stringify(a)).toEqual([])
    expect(b!.errors, JSON.stringify(b)).toEqual([])
    expect(idp.tokenRequests.refresh_token).toBe(before + 1)
    expect(a!.refreshes + b!.refreshes).toBe(1)
    expect(a!.tokens).toHaveLength(1)
    expect(b!.tokens).toEqual(a!.tokens)
    expect(await idp.accessTokenValid(a!.tokens[0]!)).toBe(true)
    expect((await store.oauth.credential(org.id, cred.id))!.status).toBe('active')
    const row = (await store.oauth.client(org.id, cred.id))!
    expect(row.generation).toBe(g0 + 1) // rotated once

    // The grant is alive at the provider: the stored (rotated) refresh token refreshes again.
    await store.db.updateTable('credential_oauth' as never).set({ access_ciphertext: null, access_refresh_at: null } as never).execute()
    const third = new OAuthMinter({ tables: store.oauth, store, sealer, audit, http })
    const token = await third.mint({ id: cred.id, orgId: org.id, name: 'gmail', provider: 'google', clientSecret: idp.clientSecret })
    expect(third.refreshes).toBe(1)
    expect(await idp.accessTokenValid(token)).toBe(true)
    expect((await store.oauth.client(org.id, cred.id))!.generation).toBe(g0 + 2)
  })
})
