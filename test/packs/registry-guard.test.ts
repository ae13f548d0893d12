// A pack registry's answers cannot send serve where the operator did not allow (issue 15's class;
// src/packs/registry-transport.ts, docs/security.md "What serve fetches itself obeys the same
// guard"). The real docker-registry sits behind a hostile front — the registry the operator named
// (CORRAL_REGISTRY_ALLOW, on loopback) — that redirects blob reads, names a token realm or starts
// an upload at 169.254.169.254, 10.x, another loopback server (a "blob store" that counts what
// reached it) or serve's own listener. Each is refused before a connection, as `not_allowed`
// naming CORRAL_REGISTRY_ALLOW_PRIVATE, and nothing reaches the other server; with the opt-in the
// same pull goes through (that server reached); serve's own listener stays refused under it. And
// serve's credentials for the registry never go along to an upload Location on another host.
// `CORRAL_REGISTRY_ALLOW=*` opens public hosts only: a registry a member names at a special address
// is refused unless the operator lists it or opens its range.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PackContent } from '../../src/packs/content.js'
import { pullPackImage, pushPackImage } from '../../src/packs/registry-image.js'
import { RegistryError } from '../../src/packs/registry.js'
import { registrySettingsFromEnv } from '../../src/packs/registry-settings.js'
import { registryAvailable, startRegistry, type TestRegistry } from '../helpers/registry.js'
import { demoPack } from './archives.js'

const available = registryAvailable()

/** Where the hostile front sends what it does not pass to the registry; `undefined` passes all. */
type Trick = { blobs?: string; realm?: string; upload?: string; basic?: string } | undefined

async function listen(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ server: Server; host: string }> {
  const server = createServer(handler)
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return { server, host: `127.0.0.1:${(server.address() as { port: number }).port}` }
}

function forward(to: string, req: IncomingMessage, res: ServerResponse, rewrite?: (location: string) => string): void {
  const upstream = request({ host: '127.0.0.1', port: Number(to.split(':')[1]), path: req.url, method: req.method, headers: { ...req.headers, host: to } }, (up) => {
    const headers = { ...up.headers }
    if (typeof headers.location === 'string' && rewrite) headers.location = rewrite(headers.location)
    res.writeHead(up.statusCode!, headers)
    up.pipe(res)
  })
  req.pipe(upstream)
}

describe.runIf(available)('pack registry fetches go through the address guard', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'corral-registry-guard-'))
  let n = 0
  const store = () => new PackContent(join(scratch, `s${n++}`))
  let registry: TestRegistry
  let front: { server: Server; host: string }
  let other: { server: Server; host: string }
  let trick: Trick
  /** Requests that reached the other loopback server (a blob store or token service not named by the operator). */
  const reached: string[] = []
  /** Requests that reached the other server with an Authorization header. */
  const credentialed: string[] = []
  let imageRef = ''

  beforeAll(async () => {
    registry = await startRegistry()
    other = await listen((req, res) => {
      reached.push(req.url ?? '')
      if (req.headers.authorization) credentialed.push(`${req.method} ${req.url}`)
      if (req.url!.startsWith('/token')) return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"token":"t"}')
      forward(registry.host, req, res)
    })
    front = await listen((req, res) => {
      const url = req.url ?? ''
      if (trick?.basic && req.headers.authorization !== trick.basic) return void res.writeHead(401, { 'www-authenticate': 'Basic realm="front"' }).end()
      if (trick?.realm && !req.headers.authorization) return void res.writeHead(401, { 'www-authenticate': `Bearer realm="${trick.realm}/token",service="front"` }).end()
      if (trick?.blobs && req.method === 'GET' && /\/blobs\/sha256:/.test(url)) return void res.writeHead(307, { location: `${trick.blobs}${url}` }).end()
      forward(registry.host, req, res, (location) => {
        const path = location.replace(/^https?:\/\/[^/]+/, '')
        return trick?.upload && req.method === 'POST' ? `${trick.upload}${path}` : `http://${front.host}${path}`
      })
    })
    const content = store()
    const ingested = await content.ingest(await demoPack({ name: 'guarded' }))
    ingested.release()
    imageRef = await pushPackImage(registrySettingsFromEnv({ CORRAL_PACK_REGISTRY: `${front.host}/ns` }), content, { orgId: 'org_a', name: 'guarded', version: '1', digest: ingested.digest })
  }, 30_000)
  afterAll(async () => {
    front?.server.close()
    other?.server.close()
    await registry?.stop()
    rmSync(scratch, { recursive: true, force: true })
  })

  const settings = (env: Record<string, string> = {}) => registrySettingsFromEnv({ CORRAL_REGISTRY_ALLOW: front.host, ...env })
  async function pull(env?: Record<string, string>, own?: { host: string; port: number }) {
    const s = settings(env)
    if (own) s.client.transport.refuseListeners(() => [own])
    try {
      const pulled = await pullPackImage(s, store(), imageRef)
      pulled.ingested.release()
      return pulled
    } finally {
      await s.client.transport.close()
    }
  }
  const refusal = async (p: Promise<unknown>) => {
    const err = (await p.then(() => undefined, (e: unknown) => e)) as RegistryError
    expect(err).toBeInstanceOf(RegistryError)
    expect(err.kind).toBe('not_allowed')
    expect(err.message.split('\n')).toHaveLength(1)
    return err.message
  }

  it('the registry the operator named is reached on loopback, its own redirects and upload Locations too', async () => {
    trick = undefined
    expect((await pull()).imageRef).toBe(imageRef)
  })

  it.each([
    ['the cloud metadata address', 'http://169.254.169.254', /169\.254\.169\.254 is a loopback, private, link-local/],
    ['a private address', 'http://10.1.2.3', /10\.1\.2\.3 is a loopback, private, link-local/],
    ['another loopback server', 'OTHER', /127\.0\.0\.1 is a loopback.*CORRAL_REGISTRY_ALLOW_PRIVATE/],
  ])('a blob redirect to %s is refused before any connection', async (_what, target, message) => {
    trick = { blobs: target === 'OTHER' ? `http://${other.host}` : target }
    reached.length = 0
    expect(await refusal(pull())).toMatch(message)
    expect(reached).toEqual([])
  })

  it.each([
    // HTTPS: a plain-HTTP realm off loopback is refused anyway (docs/packs.md "Registry").
    ['the cloud metadata address', 'https://169.254.169.254', /169\.254\.169\.254/],
    ['a private address', 'https://10.9.8.7', /10\.9\.8\.7/],
    ['another loopback server', 'OTHER', /127\.0\.0\.1 is a loopback/],
  ])('a token realm at %s is refused before any connection', async (_what, target, message) => {
    trick = { realm: target === 'OTHER' ? `http://${other.host}` : target }
    reached.length = 0
    expect(await refusal(pull())).toMatch(message)
    expect(reached).toEqual([])
  })

  it('an upload Location at another loopback server is refused: the blob is not sent there', async () => {
    trick = { upload: `http://${other.host}` }
    reached.length = 0
    const content = store()
    const ingested = await content.ingest(await demoPack({ name: 'pushed', version: '2' }))
    ingested.release()
    const s = registrySettingsFromEnv({ CORRAL_PACK_REGISTRY: `${front.host}/ns` })
    const err = await refusal(pushPackImage(s, content, { orgId: 'org_a', name: 'pushed', version: '2', digest: ingested.digest }))
    await s.client.transport.close()
    expect(err).toMatch(/127\.0\.0\.1 is a loopback/)
    expect(reached).toEqual([])
  })

  it("credentials go to the registry only: an upload Location at another allowed registry gets no Authorization", async () => {
    const basic = `Basic ${Buffer.from('corral:pw').toString('base64')}`
    const authFile = join(scratch, 'auth.json')
    writeFileSync(authFile, JSON.stringify({ auths: { [front.host]: { auth: Buffer.from('corral:pw').toString('base64') } } }))
    trick = { upload: `http://${other.host}`, basic }
    reached.length = 0
    credentialed.length = 0
    const content = store()
    const ingested = await content.ingest(await demoPack({ name: 'credentialed', version: '3' }))
    ingested.release()
    // The other host is a registry the operator allowed: reached, but without serve's credentials for the front.
    const s = registrySettingsFromEnv({ CORRAL_PACK_REGISTRY: `${front.host}/ns`, CORRAL_REGISTRY_ALLOW: other.host, CORRAL_REGISTRY_AUTH_FILE: authFile })
    try {
      expect(await pushPackImage(s, content, { orgId: 'org_a', name: 'credentialed', version: '3', digest: ingested.digest })).toMatch(/@sha256:/)
    } finally {
      await s.client.transport.close()
    }
    expect(reached.some((u) => u.includes('/blobs/uploads/'))).toBe(true)
    expect(credentialed).toEqual([])
  })

  it('CORRAL_REGISTRY_ALLOW_PRIVATE opens a range: the redirect and the realm then reach the other server', async () => {
    trick = { blobs: `http://${other.host}`, realm: `http://${other.host}` }
    reached.length = 0
    expect((await pull({ CORRAL_REGISTRY_ALLOW_PRIVATE: '127.0.0.0/8' })).imageRef).toBe(imageRef)
    expect(reached.some((u) => u.startsWith('/token'))).toBe(true)
    expect(reached.some((u) => /\/blobs\/sha256:/.test(u))).toBe(true)
  })

  it("serve's own listener is refused under the opt-in, and even when it is the registry the operator named", async () => {
    trick = { blobs: `http://${other.host}` }
    reached.length = 0
    const own = { host: '127.0.0.1', port: Number(other.host.split(':')[1]) }
    expect(await refusal(pull({ CORRAL_REGISTRY_ALLOW_PRIVATE: '0.0.0.0/0' }, own))).toMatch(/is a listener of corral serve/)
    expect(reached).toEqual([])
    trick = undefined
    const named = { host: '127.0.0.1', port: Number(front.host.split(':')[1]) }
    expect(await refusal(pull({}, named))).toMatch(new RegExp(`${front.host} is a listener of corral serve`))
  })

  it.each([
    ['`*` alone', '*', /127\.0\.0\.1 is a loopback.*CORRAL_REGISTRY_ALLOW_PRIVATE/],
    ['`*` beside another named registry', 'NAMED', /127\.0\.0\.1 is a loopback/],
  ])('under CORRAL_REGISTRY_ALLOW=%s a registry a reference names on loopback is refused before any connection', async (_what, allow, message) => {
    trick = undefined
    reached.length = 0
    // The other server forwards to the real registry: a pull through it would succeed if it were reached.
    const ref = imageRef.replace(front.host, other.host)
    const s = registrySettingsFromEnv({ CORRAL_REGISTRY_ALLOW: allow === 'NAMED' ? `*,${front.host}` : allow })
    try {
      expect(await refusal(pullPackImage(s, store(), ref))).toMatch(message)
    } finally {
      await s.client.transport.close()
    }
    expect(reached).toEqual([])
  })

  it.each([
    ['the operator opens its range', { CORRAL_REGISTRY_ALLOW: '*', CORRAL_REGISTRY_ALLOW_PRIVATE: '127.0.0.1' }],
    ['the operator lists it beside `*`', { CORRAL_REGISTRY_ALLOW: 'OTHER,*' }],
  ])('under CORRAL_REGISTRY_ALLOW=* a registry on loopback is reached when %s', async (_what, env) => {
    trick = undefined
    reached.length = 0
    const ref = imageRef.replace(front.host, other.host)
    const s = registrySettingsFromEnv({ ...env, CORRAL_REGISTRY_ALLOW: env.CORRAL_REGISTRY_ALLOW.replace('OTHER', other.host) })
    try {
      const pulled = await pullPackImage(s, store(), ref)
      pulled.ingested.release()
      expect(pulled.imageRef).toBe(ref)
    } finally {
      await s.client.transport.close()
    }
    expect(reached.length).toBeGreaterThan(0)
  })

  it('a bad CORRAL_REGISTRY_ALLOW_PRIVATE entry is one error naming the variable', () => {
    expect(() => registrySettingsFromEnv({ CORRAL_REGISTRY_ALLOW_PRIVATE: '10.0.0.0/99' })).toThrow(/CORRAL_REGISTRY_ALLOW_PRIVATE must list/)
  })
})
