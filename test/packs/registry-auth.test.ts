// Registry authentication on real servers: docker-registry with htpasswd (the Basic challenge),
// and the same registry behind a token gate that answers with a Bearer challenge whose realm
// issues tokens for Basic credentials — the flow of Docker Hub, GHCR and Harbor. Credentials come
// from a Docker-style config.json (CORRAL_REGISTRY_AUTH_FILE).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, request, type Server } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PackContent } from '../../src/packs/content.js'
import { pullPackImage, pushPackImage } from '../../src/packs/registry-image.js'
import { RegistryError } from '../../src/packs/registry.js'
import { registrySettingsFromEnv } from '../../src/packs/registry-settings.js'
import { registryAvailable, startRegistry, type TestRegistry } from '../helpers/registry.js'
import { demoPack } from './archives.js'

// bcrypt (cost 4) of "s3cret-pw" for user "corral"; distribution's htpasswd accepts only bcrypt.
const HTPASSWD = 'corral:$2b$04$wUgOeDQo8KzbzMyShalvGOZ.CqNXd2VYV1Gml2qhkhJDfWVZF9ple'
const available = registryAvailable()

describe.runIf(available)('registry authentication', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'corral-registry-auth-'))
  let n = 0
  const store = () => new PackContent(join(scratch, `s${n++}`))
  const authFile = (user: string, password: string) => {
    const file = join(scratch, `auth-${n++}.json`)
    writeFileSync(file, JSON.stringify({ auths: { ...authsFor(user, password) } }))
    return file
  }
  let hosts: string[] = []
  const authsFor = (user: string, password: string) => Object.fromEntries(hosts.map((h) => [h, { auth: Buffer.from(`${user}:${password}`).toString('base64') }]))
  let basic: TestRegistry
  let open: TestRegistry
  let gate: Server
  let gateHost: string
  const issued: string[] = []

  beforeAll(async () => {
    basic = await startRegistry({ htpasswd: HTPASSWD })
    open = await startRegistry()
    // The token gate: /token hands out a token for good Basic credentials; /v2/* needs that token
    // and is then proxied to the open registry.
    gate = createServer((req, res) => {
      if (req.url!.startsWith('/token')) {
        const ok = req.headers.authorization === `Basic ${Buffer.from('corral:s3cret-pw').toString('base64')}`
        const scope = new URL(req.url!, 'http://x').searchParams.get('scope') ?? ''
        if (!ok) return void res.writeHead(401).end()
        issued.push(scope)
        return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ token: `tok ${scope}` }))
      }
      const scopeOf = (url: string) => {
        const repo = /^\/v2\/(.+)\/(?:manifests|blobs)\//.exec(url)?.[1] ?? ''
        return `repository:${repo}:${req.method === 'GET' || req.method === 'HEAD' ? 'pull' : 'pull,push'}`
      }
      const auth = req.headers.authorization ?? ''
      const granted = auth.startsWith('Bearer tok ') ? auth.slice('Bearer tok '.length) : ''
      const need = scopeOf(req.url!)
      if (!(granted === need || (granted.endsWith(':pull,push') && need.endsWith(':pull') && granted.startsWith(need.slice(0, -':pull'.length))))) {
        return void res.writeHead(401, { 'www-authenticate': `Bearer realm="http://${gateHost}/token",service="gate",scope="${need}"` }).end()
      }
      const upstream = request({ host: '127.0.0.1', port: Number(open.host.split(':')[1]), path: req.url, method: req.method, headers: { ...req.headers, host: open.host } }, (up) => {
        // The registry's upload Location names its own address; clients must come back through the gate.
        const headers = { ...up.headers }
        if (typeof headers.location === 'string') headers.location = headers.location.replace(open.host, gateHost)
        res.writeHead(up.statusCode!, headers)
        up.pipe(res)
      })
      req.pipe(upstream)
    })
    await new Promise<void>((r) => gate.listen(0, '127.0.0.1', r))
    gateHost = `127.0.0.1:${(gate.address() as { port: number }).port}`
    hosts = [basic.host, gateHost]
  }, 30_000)
  afterAll(async () => {
    gate?.close()
    await basic?.stop()
    await open?.stop()
    rmSync(scratch, { recursive: true, force: true })
  })

  async function roundTrip(registry: string, env: Record<string, string>) {
    const source = store()
    const ingested = await source.ingest(await demoPack({ name: 'authed' }))
    ingested.release()
    const settings = registrySettingsFromEnv({ CORRAL_PACK_REGISTRY: `${registry}/ns`, ...env })
    const ref = await pushPackImage(settings, source, { orgId: 'org_a', name: 'authed', version: '1', digest: ingested.digest })
    const pulled = await pullPackImage(settings, store(), ref)
    pulled.ingested.release()
    expect(pulled.ingested.digest).toBe(ingested.digest)
    return ref
  }
  const failure = async (p: Promise<unknown>) => (await p.then(() => undefined, (e: unknown) => e)) as RegistryError

  it('Basic: pushes and pulls with configured credentials; refuses none and wrong ones as denied', async () => {
    await roundTrip(basic.host, { CORRAL_REGISTRY_AUTH_FILE: authFile('corral', 's3cret-pw') })
    const none = await failure(roundTrip(basic.host, {}))
    expect(none.kind).toBe('denied')
    expect(none.message).toMatch(/requires credentials/)
    const wrong = await failure(roundTrip(basic.host, { CORRAL_REGISTRY_AUTH_FILE: authFile('corral', 'nope') }))
    expect(wrong.kind).toBe('denied')
    expect(wrong.message).toMatch(/refused the credentials/)
  })

  it('Bearer: fetches a token for the repository scope from the realm, with the credentials', async () => {
    issued.length = 0
    await roundTrip(gateHost, { CORRAL_REGISTRY_AUTH_FILE: authFile('corral', 's3cret-pw') })
    expect(issued).toContain('repository:ns/org_a/authed:pull,push')
    expect(issued).toContain('repository:ns/org_a/authed:pull')
    const wrong = await failure(roundTrip(gateHost, { CORRAL_REGISTRY_AUTH_FILE: authFile('corral', 'nope') }))
    expect(wrong.kind).toBe('denied')
    expect(wrong.message).toMatch(/token service refused the credentials/)
  })

  it('refuses a credentials file that is not a Docker config.json, naming the variable', () => {
    const file = join(scratch, 'broken.json')
    writeFileSync(file, '{not json')
    expect(() => registrySettingsFromEnv({ CORRAL_REGISTRY_AUTH_FILE: file })).toThrow(/CORRAL_REGISTRY_AUTH_FILE/)
    expect(() => registrySettingsFromEnv({ CORRAL_REGISTRY_AUTH_FILE: join(scratch, 'missing.json') })).toThrow(/cannot be read/)
  })
})
