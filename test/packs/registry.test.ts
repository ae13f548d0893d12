// The OCI client and pack images against a real registry (Debian's docker-registry, distribution
// 2.8): push a stored pack as an image and pull it back to the same digest, pull a hand-built
// multi-layer image with whiteouts (gzip and plain layers, an index in front), and every failure
// the routes map — bad reference, host not allowed, missing tag, unreachable registry, a blob that
// does not match its digest, unsupported layers.
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs'
import { createServer } from 'node:http'
import { networkInterfaces, tmpdir } from 'node:os'
import { join } from 'node:path'
import { gzipSync } from 'node:zlib'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PackContent } from '../../src/packs/content.js'
import { LAYER_TAR, checkPullAccess, pullPackImage, pushPackImage, versionTag } from '../../src/packs/registry-image.js'
import {
  OCI_INDEX, OCI_MANIFEST, RegistryClient, RegistryError, bufferBody, formatImageRef, parseImageRef, sha256,
  type Descriptor, type ImageRef,
} from '../../src/packs/registry.js'
import { registrySettingsFromEnv, type RegistrySettings } from '../../src/packs/registry-settings.js'
import { freePort, registryAvailable, startRegistry, type TestRegistry } from '../helpers/registry.js'
import { demoPack, tarOf, type TestEntry } from './archives.js'

describe('pull access to the push namespace', () => {
  const seen = `sha256:${'b'.repeat(64)}`
  const access = { orgId: 'org_Mine', canSee: async (ref: ImageRef) => ref.digest === seen }
  const check = (push: string, ref: string) => checkPullAccess(registrySettingsFromEnv({ CORRAL_PACK_REGISTRY: push }), parseImageRef(ref), access)

  it("passes the caller's own org, a visible image_ref by digest, and anything outside the namespace", async () => {
    await check('reg.example.com/ns', 'reg.example.com/ns/org_mine/tools:1')
    await check('reg.example.com/ns', `reg.example.com/ns/org_other/tools@${seen}`)
    await check('reg.example.com/ns', 'reg.example.com/elsewhere/tools:1')
    await check('reg.example.com/ns', 'other.example.com/ns/org_other/tools:1')
  })

  it("refuses another org's images by tag, or by a digest the caller cannot see; without a namespace the whole host counts", async () => {
    await expect(check('reg.example.com/ns', 'reg.example.com/ns/org_other/tools:1')).rejects.toMatchObject({ kind: 'not_allowed' })
    await expect(check('reg.example.com/ns', `reg.example.com/ns/org_other/tools@sha256:${'c'.repeat(64)}`)).rejects.toMatchObject({ kind: 'not_allowed' })
    await expect(check('reg.example.com', 'reg.example.com/org_other/tools:1')).rejects.toMatchObject({ kind: 'not_allowed' })
    await check('reg.example.com', 'reg.example.com/org_mine/tools:1')
  })
})

describe('image references', () => {
  it('parses host, repository, tag and digest, defaulting the tag to latest', () => {
    const d = `sha256:${'a'.repeat(64)}`
    expect(parseImageRef('reg.example.com/team/tools')).toEqual({ registry: 'reg.example.com', repository: 'team/tools', tag: 'latest' })
    expect(parseImageRef('127.0.0.1:5000/a/b:1.2')).toEqual({ registry: '127.0.0.1:5000', repository: 'a/b', tag: '1.2' })
    expect(parseImageRef(`localhost/x@${d}`)).toEqual({ registry: 'localhost', repository: 'x', digest: d })
    expect(parseImageRef(`Reg.Example.com:443/x:v1@${d}`)).toEqual({ registry: 'reg.example.com:443', repository: 'x', tag: 'v1', digest: d })
    expect(formatImageRef(parseImageRef(`reg.example.com/x:v1@${d}`))).toBe(`reg.example.com/x:v1@${d}`)
  })

  it.each([
    ['ubuntu', 'no registry host'],
    ['library/ubuntu:22.04', 'registry host'],
    ['reg.example.com/UPPER', 'bad repository'],
    ['reg.example.com/x:bad tag', 'spaces'],
    ['reg.example.com/x@sha256:abc', 'digest'],
    ['reg.example.com/x:-bad', 'bad tag'],
    ['reg.example.com/../x', 'bad repository'],
  ])('refuses %s', (ref, why) => {
    expect(() => parseImageRef(ref)).toThrow(why)
    try {
      parseImageRef(ref)
    } catch (err) {
      expect((err as RegistryError).kind).toBe('reference')
    }
  })

  it('turns versions into tags', () => {
    expect(versionTag('1.0.0')).toBe('1.0.0')
    expect(versionTag('1.0+build.5')).toBe('1.0-build.5')
    expect(versionTag('.hidden')).toBe('hidden')
    expect(versionTag('+')).toBe('latest')
  })

  it('reads the serve settings from the environment', () => {
    const s = registrySettingsFromEnv({ CORRAL_PACK_REGISTRY: 'Reg.example.com:5000/corral/packs/', CORRAL_REGISTRY_ALLOW: 'a.example.com, b.example.com' })
    expect(s.push).toEqual({ registry: 'reg.example.com:5000', namespace: 'corral/packs' })
    expect(s.allow).toEqual(new Set(['a.example.com', 'b.example.com', 'reg.example.com:5000']))
    expect(registrySettingsFromEnv({ CORRAL_REGISTRY_ALLOW: '*' }).allow).toBe('*')
    expect(registrySettingsFromEnv({}).push).toBeUndefined()
    expect(() => registrySettingsFromEnv({ CORRAL_PACK_REGISTRY: 'reg.example.com/Bad Space' })).toThrow('CORRAL_PACK_REGISTRY')
  })
})

const available = registryAvailable()

describe.runIf(available)('packs on a real registry', () => {
  let registry: TestRegistry
  let settings: RegistrySettings
  const scratch = mkdtempSync(join(tmpdir(), 'corral-registry-test-'))
  const client = new RegistryClient()
  let n = 0
  const store = () => new PackContent(join(scratch, `store-${n++}`))

  beforeAll(async () => {
    registry = await startRegistry()
    settings = registrySettingsFromEnv({ CORRAL_PACK_REGISTRY: `${registry.host}/corral` })
  }, 30_000)
  afterAll(async () => {
    await registry?.stop()
    rmSync(scratch, { recursive: true, force: true })
  })

  /** Pushes a hand-built image (layers as given) and returns its reference text. */
  async function pushImage(repository: string, tag: string, layers: { bytes: Buffer; mediaType: string }[], opts: { index?: boolean } = {}): Promise<string> {
    const ref: ImageRef = { registry: registry.host, repository }
    const descs: Descriptor[] = []
    for (const l of layers) {
      const d = { mediaType: l.mediaType, digest: sha256(l.bytes), size: l.bytes.length }
      await client.pushBlob(ref, d, bufferBody(l.bytes))
      descs.push(d)
    }
    const config = Buffer.from('{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}')
    const cd = { mediaType: 'application/vnd.oci.image.config.v1+json', digest: sha256(config), size: config.length }
    await client.pushBlob(ref, cd, bufferBody(config))
    const manifest = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: OCI_MANIFEST, config: cd, layers: descs }))
    const md = await client.putManifest(ref, opts.index ? `${tag}-image` : tag, manifest, OCI_MANIFEST)
    if (opts.index) {
      const index = Buffer.from(JSON.stringify({
        schemaVersion: 2,
        mediaType: OCI_INDEX,
        manifests: [
          { mediaType: OCI_MANIFEST, digest: md, size: manifest.length, platform: { os: 'linux', architecture: 'amd64' } },
          { mediaType: OCI_MANIFEST, digest: md, size: manifest.length, platform: { os: 'unknown', architecture: 'unknown' } },
        ],
      }))
      await client.putManifest(ref, tag, index, OCI_INDEX)
    }
    return `${registry.host}/${repository}:${tag}`
  }

  const failure = async (p: Promise<unknown>) => {
    const err = await p.then(() => undefined, (e: unknown) => e)
    expect(err).toBeDefined()
    return err as RegistryError & { code?: string; details?: { fields?: Record<string, string> } }
  }

  it('pushes a stored pack as a one-layer image whose layer digest is the pack digest, and pulls it back', async () => {
    const source = store()
    const ingested = await source.ingest(await demoPack({ version: '1.0+b1' }))
    ingested.release()
    const imageRef = await pushPackImage(settings, source, { orgId: 'org_ABC', name: 'Demo_Pack', version: '1.0+b1', digest: ingested.digest })
    expect(imageRef).toMatch(new RegExp(`^${registry.host.replace('.', '\\.')}/corral/org_abc/demo_pack@sha256:[0-9a-f]{64}$`))

    // The registry holds the manifest under the version tag, with our annotations and one plain tar layer.
    const { manifest, digest } = await client.getManifest(parseImageRef(`${registry.host}/corral/org_abc/demo_pack:1.0-b1`))
    expect(`${registry.host}/corral/org_abc/demo_pack@${digest}`).toBe(imageRef)
    expect(manifest.layers).toEqual([{ mediaType: LAYER_TAR, digest: ingested.digest, size: expect.any(Number) }])
    expect(manifest.annotations).toEqual({ 'org.opencontainers.image.title': 'Demo_Pack', 'org.opencontainers.image.version': '1.0+b1' })

    const target = store()
    const pulled = await pullPackImage(settings, target, imageRef)
    pulled.ingested.release()
    expect(pulled.imageRef).toBe(imageRef)
    expect(pulled.ingested.digest).toBe(ingested.digest)
    expect(pulled.ingested.manifest.name).toBe('demo')
    expect(readFileSync(join(target.dir(pulled.ingested.digest), 'bin/agent'), 'utf8')).toBe('#!/bin/sh\necho hi\n')
    // Pushing again reuses the blobs and yields the same manifest digest.
    expect(await pushPackImage(settings, source, { orgId: 'org_ABC', name: 'Demo_Pack', version: '1.0+b1', digest: ingested.digest })).toBe(imageRef)
    // No scratch directory is left behind.
    expect(readdirSync(target.root).filter((f) => f.startsWith('.'))).toEqual([])
  })

  it('flattens a multi-layer image with whiteouts and an opaque directory, behind an index', async () => {
    const layer1: TestEntry[] = [
      { name: './', type: 'directory' },
      { name: './pack.yaml', body: 'name: layered\nversion: "1"\n' },
      { name: './old.txt', body: 'old' },
      { name: './keep/a.txt', body: 'a1' },
      { name: './opaque/x.txt', body: 'x' },
      { name: './gone/deep/y.txt', body: 'y' },
      { name: './becomes-file/z.txt', body: 'z' },
    ]
    const layer2: TestEntry[] = [
      { name: 'old.txt', type: 'file', body: 'new' },
      { name: 'keep/a.txt', body: 'a2' },
      { name: 'keep/b.txt', body: 'b' },
      { name: 'opaque/', type: 'directory' },
      { name: 'opaque/.wh..wh..opq', body: '' },
      { name: 'opaque/fresh.txt', body: 'fresh' },
      { name: '.wh.gone', body: '' },
      { name: 'becomes-file', body: 'now a file' },
    ]
    const ref = await pushImage('test/layered', 'v1', [
      { bytes: gzipSync(await tarOf(layer1)), mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip' },
      { bytes: await tarOf(layer2), mediaType: LAYER_TAR },
    ], { index: true })
    const target = store()
    const { ingested, imageRef } = await pullPackImage(settings, target, ref)
    ingested.release()
    expect(imageRef).toBe(ref)
    const root = target.dir(ingested.digest)
    const tree = (dir: string, rel = ''): string[] => readdirSync(join(dir, rel), { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? [`${rel}${e.name}/`, ...tree(dir, `${rel}${e.name}/`)] : [`${rel}${e.name}`])
    expect(tree(root).sort()).toEqual(['becomes-file', 'keep/', 'keep/a.txt', 'keep/b.txt', 'old.txt', 'opaque/', 'opaque/fresh.txt', 'pack.yaml'])
    expect(readFileSync(join(root, 'old.txt'), 'utf8')).toBe('new')
    expect(readFileSync(join(root, 'keep/a.txt'), 'utf8')).toBe('a2')
    expect(readFileSync(join(root, 'becomes-file'), 'utf8')).toBe('now a file')
  })

  it('applies the archive rules to images: a link out of the pack is refused on image_ref', async () => {
    const ref = await pushImage('test/escape', 'v1', [{ bytes: await tarOf([{ name: 'pack.yaml', body: 'name: esc\nversion: "1"\n' }, { name: 'out', type: 'symlink', linkname: '../../etc/passwd' }]), mediaType: LAYER_TAR }])
    const err = await failure(pullPackImage(settings, store(), ref))
    expect(err.code).toBe('validation_error')
    expect(err.details?.fields?.image_ref).toMatch(/points outside the pack/)
  })

  it('refuses an image without pack.yaml, naming image_ref', async () => {
    const ref = await pushImage('test/nopack', 'v1', [{ bytes: await tarOf([{ name: 'readme', body: 'x' }]), mediaType: LAYER_TAR }])
    const err = await failure(pullPackImage(settings, store(), ref))
    expect(err.details?.fields?.image_ref).toMatch(/no pack.yaml/)
  })

  it('reports a missing tag, a missing repository and an unsupported layer type', async () => {
    expect((await failure(pullPackImage(settings, store(), `${registry.host}/test/layered:nope`))).kind).toBe('not_found')
    expect((await failure(pullPackImage(settings, store(), `${registry.host}/never/pushed`))).kind).toBe('not_found')
    const ref = await pushImage('test/zstd', 'v1', [{ bytes: Buffer.from('not really zstd'), mediaType: 'application/vnd.oci.image.layer.v1.tar+zstd' }])
    const err = await failure(pullPackImage(settings, store(), ref))
    expect(err.kind).toBe('invalid')
    expect(err.message).toMatch(/tar\+zstd is not supported/)
  })

  it('pulls by digest as well as by tag; an unknown digest is not found', async () => {
    const ref = await pushImage('test/digest', 'v1', [{ bytes: await tarOf([{ name: 'pack.yaml', body: 'name: d\nversion: "1"\n' }]), mediaType: LAYER_TAR }])
    const wrong = `${registry.host}/test/digest@sha256:${'0'.repeat(64)}`
    expect((await failure(pullPackImage(settings, store(), wrong))).kind).toBe('not_found')
    // By tag and by the right digest both work.
    const { digest } = await client.getManifest(parseImageRef(ref))
    const byDigest = await pullPackImage(settings, store(), `${registry.host}/test/digest@${digest}`)
    byDigest.ingested.release()
    expect(byDigest.ingested.manifest.name).toBe('d')
  })

  it('refuses a host that is not allowed, before any request', async () => {
    const err = await failure(pullPackImage(settings, store(), 'registry.example.com/x:1'))
    expect(err.kind).toBe('not_allowed')
  })

  it('reports an unreachable registry as unreachable', async () => {
    const port = await freePort()
    const open = registrySettingsFromEnv({ CORRAL_REGISTRY_ALLOW: `127.0.0.1:${port}` })
    const err = await failure(pullPackImage(open, store(), `127.0.0.1:${port}/x/y:1`))
    expect(err).toBeInstanceOf(RegistryError)
    expect(err.kind).toBe('unreachable')
    expect(err.message).toMatch(/unreachable \(ECONNREFUSED\)/)
  })

  it('speaks HTTPS to hosts that are neither loopback nor listed in CORRAL_REGISTRY_INSECURE', async () => {
    const ip = Object.values(networkInterfaces()).flat().find((a) => a && a.family === 'IPv4' && !a.internal)?.address
    if (!ip) return // no non-loopback address on this machine: nothing to tell apart
    const plain = createServer((_req, res) => res.writeHead(404, { 'content-type': 'application/json' }).end('{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}'))
    await new Promise<void>((r) => plain.listen(0, ip, r))
    try {
      const host = `${ip}:${(plain.address() as { port: number }).port}`
      const tls = await failure(pullPackImage(registrySettingsFromEnv({ CORRAL_REGISTRY_ALLOW: host }), store(), `${host}/x/y:1`))
      expect(tls.kind).toBe('unreachable')
      const insecure = await failure(pullPackImage(registrySettingsFromEnv({ CORRAL_REGISTRY_ALLOW: host, CORRAL_REGISTRY_INSECURE: host }), store(), `${host}/x/y:1`))
      expect(insecure.kind).toBe('not_found')
    } finally {
      plain.close()
    }
  })
})
