// The registry side of /v1/packs on the real app, a real store (SQLite, and Postgres when
// configured), a real content store and a real registry (docker-registry): POST /v1/packs by
// image reference, PUT image_ref, and — with a push registry configured — uploads, re-uploads and
// clones that push the pack's image and record an image_ref that pulls back to the same tree.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PackContent } from '../../src/packs/content.js'
import { pullPackImage, pushPackImage } from '../../src/packs/registry-image.js'
import { RegistryClient, parseImageRef } from '../../src/packs/registry.js'
import { registrySettingsFromEnv, type RegistrySettings } from '../../src/packs/registry-settings.js'
import { testDialects } from '../helpers/dialects.js'
import { freePort, registryAvailable, startRegistry, type TestRegistry } from '../helpers/registry.js'
import { tableWorkspaceControl } from '../server/agent-roles-fixtures.js'
import { createHarness, type Harness } from '../server/harness.js'
import { demoPack } from './archives.js'

const available = registryAvailable()
const scratch = mkdtempSync(join(tmpdir(), 'corral-registry-routes-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

function multipart(parts: Record<string, string | Buffer>): { payload: Buffer; headers: Record<string, string> } {
  const boundary = `----corral${Math.random().toString(16).slice(2)}`
  const chunks: Buffer[] = []
  for (const [name, value] of Object.entries(parts)) {
    const file = Buffer.isBuffer(value)
    chunks.push(Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="${name}"${file ? `; filename="${name}.tgz"\r\ncontent-type: application/gzip` : ''}\r\n\r\n`))
    chunks.push(file ? value : Buffer.from(value), Buffer.from('\r\n'))
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`))
  return { payload: Buffer.concat(chunks), headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } }
}

for (const d of testDialects()) describe.runIf(available)(`registry pack routes [${d.name}]`, () => {
  let h: Harness
  let registry: TestRegistry
  let control: ReturnType<typeof tableWorkspaceControl>
  let content: PackContent
  /** Where images are prepared: a store apart from the server's, as another corral or a CI job would be. */
  let publisher: PackContent
  /** Pulls allowed from the test registry; nothing pushed. */
  let pullOnly: RegistrySettings
  /** Pushes to <registry>/corral-<dialect>. */
  let pushing: RegistrySettings
  const client = new RegistryClient()

  beforeAll(async () => {
    registry = await startRegistry()
    h = await createHarness({ open: d.open })
    control = tableWorkspaceControl(h.store)
    h.deps.workspaceControl = control
    content = new PackContent(join(scratch, d.name, 'server'))
    publisher = new PackContent(join(scratch, d.name, 'publisher'))
    pullOnly = registrySettingsFromEnv({ CORRAL_REGISTRY_ALLOW: registry.host })
    pushing = registrySettingsFromEnv({ CORRAL_PACK_REGISTRY: `${registry.host}/corral-${d.name}` })
    h.deps.packContent = content
    h.deps.packRegistry = pullOnly
  }, 30_000)
  afterAll(async () => {
    await h?.close()
    await registry?.stop()
  })

  /** Publishes a pack (built from demoPack options) to the registry; resolves with its reference by digest. */
  async function publish(opts: Parameters<typeof demoPack>[0] & { name: string }): Promise<{ ref: string; digest: string }> {
    const ingested = await publisher.ingest(await demoPack(opts))
    ingested.release()
    const ref = await pushPackImage(registrySettingsFromEnv({ CORRAL_PACK_REGISTRY: `${registry.host}/published-${d.name}` }), publisher, {
      orgId: 'org_publisher', name: opts.name, version: opts.version ?? '1.0.0', digest: ingested.digest,
    })
    return { ref, digest: ingested.digest }
  }
  const create = (token: string, body: Record<string, unknown>) => h.inject('POST', '/v1/packs', { token, body })
  const events = async (token: string, types: string) => {
    await h.audit.flush()
    const page = await h.inject('GET', `/v1/audit?filter=event_type=${types}&order=asc`, { token })
    return page.body.events as Array<{ event_type: string; detail: Record<string, unknown> }>
  }
  const upload = async (token: string, parts: Record<string, string | Buffer>, url = '/v1/packs/upload', method: 'POST' | 'PUT' = 'POST') => {
    const { payload, headers } = multipart(parts)
    const res = await h.app.inject({ method, url, payload, headers: { ...headers, authorization: `Bearer ${token}` } })
    return { status: res.statusCode, body: res.json() }
  }
  const trees = () => readdirSync(content.root).filter((n) => n.startsWith('sha256-')).sort()
  const role = async (token: string, name: string, packIds: string[]) => {
    const prov = await h.inject('POST', '/v1/providers', { token, body: { name: `p-${name}`, kind: 'anthropic', domain: 'api.anthropic.com' } })
    return h.inject('POST', '/v1/agent-roles', { token, body: { name, provider_id: prov.body.id, pack_ids: packIds } })
  }

  it('creates a pack from an image reference: content, digest and event match the image', async () => {
    const { ownerToken, orgId } = await h.newOrg()
    const { ref, digest } = await publish({ name: 'imgpack' })
    const res = await create(ownerToken, { image_ref: ref, visibility: 'community' })
    expect(res.status).toBe(201)
    expect(res.body).toMatchObject({
      org_id: orgId, name: 'imgpack', version: '1.0.0', tier: 'community', visibility: 'community',
      image_origin: 'image_ref', image_ref: ref, image_digest: digest, owned: true, description: 'A demo pack',
    })
    expect(readFileSync(join(content.dir(digest), 'bin/agent'), 'utf8')).toBe('#!/bin/sh\necho hi\n')
    const ev = await events(ownerToken, 'content_pack_created')
    expect(ev.map((e) => e.detail)).toEqual([{
      resource_id: res.body.id, name: 'imgpack', display_name: 'imgpack', version: '1.0.0', visibility: 'community', tier: 'community', image_origin: 'image_ref',
    }])
    // The reference by tag is normalised (default tag latest when none given; here the version tag).
    const byTag = await create((await h.newOrg()).ownerToken, { image_ref: `${parseImageRef(ref).registry}/${parseImageRef(ref).repository}:1.0.0` })
    expect(byTag.status).toBe(201)
    expect(byTag.body).toMatchObject({ image_ref: `${parseImageRef(ref).registry}/${parseImageRef(ref).repository}:1.0.0`, image_digest: digest })
    // Same name again in the org: conflict, and the content stays (the first pack uses it).
    const again = await create(ownerToken, { image_ref: ref })
    expect(again.status).toBe(409)
    expect(again.body.error.code).toBe('conflict')
    expect(await content.has(digest)).toBe(true)
    // A registry-origin pack takes no archive.
    const reupload = await upload(ownerToken, { archive: await demoPack({ name: 'imgpack' }) }, `/v1/packs/${res.body.id}/upload`, 'PUT')
    expect(reupload.status).toBe(409)
    expect(reupload.body.error.code).toBe('pack_not_reuploadable')
  })

  it('answers bad references, missing images, refused hosts and an unreachable registry clearly', async () => {
    const { ownerToken } = await h.newOrg()
    const before = trees()
    const bad = async (body: Record<string, unknown>, match: RegExp) => {
      const res = await create(ownerToken, body)
      expect(res.status).toBe(400)
      expect(res.body.error.code).toBe('validation_error')
      expect(res.body.error.details.fields.image_ref).toMatch(match)
    }
    await bad({ image_ref: 'ubuntu' }, /no registry host/)
    await bad({ image_ref: `${registry.host}/published-${d.name}/org_publisher/imgpack:no-such-tag` }, /no manifest no-such-tag/)
    await bad({ image_ref: 'registry.example.com/x:1' }, /not an allowed pack registry/)
    expect((await create(ownerToken, {})).body.error.details.fields).toHaveProperty('image_ref')
    expect((await create(ownerToken, { image_ref: 'a.example.com/x', visibility: 'public' })).status).toBe(400)

    const port = await freePort()
    h.deps.packRegistry = registrySettingsFromEnv({ CORRAL_REGISTRY_ALLOW: `127.0.0.1:${port}` })
    try {
      const down = await create(ownerToken, { image_ref: `127.0.0.1:${port}/x/y:1` })
      expect(down.status).toBe(502)
      expect(down.body.error.code).toBe('registry_unavailable')
      expect(down.body.error.message).toMatch(/unreachable/)
    } finally {
      h.deps.packRegistry = pullOnly
    }
    expect(trees()).toEqual(before)
    expect(readdirSync(content.root).filter((n) => n.startsWith('.'))).toEqual([])
  })

  it('PUT image_ref re-pulls a registry pack: new content, image_ref event, attaching roles restart', async () => {
    const a = await h.newOrg()
    const v1 = await publish({ name: 'moving' })
    const v2 = await publish({ name: 'moving', version: '2.0.0', manifest: 'name: moving\nversion: "2.0.0"\ndisplay_name: Moving v2\n' })
    const pack = (await create(a.ownerToken, { image_ref: v1.ref })).body
    const r = (await role(a.ownerToken, 'uses-moving', [pack.id])).body
    control.restarts.length = 0

    const res = await h.inject('PUT', `/v1/packs/${pack.id}`, { token: a.ownerToken, body: { image_ref: v2.ref, category: 'tools' } })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ id: pack.id, version: '2.0.0', display_name: 'Moving v2', category: 'tools', image_ref: v2.ref, image_digest: v2.digest, image_origin: 'image_ref' })
    expect(res.body.description).toBeUndefined()
    expect(await content.has(v1.digest)).toBe(false) // no row references the old tree any more
    expect(control.restarts).toEqual([r.id])
    const ev = await events(a.ownerToken, 'content_pack_updated')
    expect(ev.map((e) => e.detail)).toEqual([{ resource_id: pack.id, name: 'moving', version: '2.0.0', image_ref: v2.ref, kind: 'image_ref', patched_fields: ['category', 'image_ref'] }])

    // An image of another pack is refused on image_ref, and nothing changes.
    const other = await publish({ name: 'different' })
    const wrong = await h.inject('PUT', `/v1/packs/${pack.id}`, { token: a.ownerToken, body: { image_ref: other.ref } })
    expect(wrong.status).toBe(400)
    expect(wrong.body.error.details.fields.image_ref).toMatch(/names different, but this pack is moving/)
    expect((await h.inject('GET', `/v1/packs/${pack.id}`, { token: a.ownerToken })).body.image_digest).toBe(v2.digest)
    // image_ref on an uploaded pack stays refused.
    const uploaded = (await upload(a.ownerToken, { archive: await demoPack({ name: 'plain' }) })).body
    const refused = await h.inject('PUT', `/v1/packs/${uploaded.id}`, { token: a.ownerToken, body: { image_ref: v1.ref } })
    expect(refused.status).toBe(400)
    expect(refused.body.error.details.fields.image_ref).toMatch(/registry-origin packs only/)
  })

  it("PUT image_ref may not make a pack an agent under other orgs' roles", async () => {
    const a = await h.newOrg()
    const b = await h.newOrg()
    const quiet = await publish({ name: 'turncoat', manifest: 'name: turncoat\nversion: "1.0.0"\n' })
    const loud = await publish({ name: 'turncoat', version: '2.0.0' })
    const pack = (await create(a.ownerToken, { image_ref: quiet.ref, visibility: 'community' })).body
    expect((await role(b.ownerToken, 'trusts-turncoat', [pack.id])).status).toBe(201)
    const res = await h.inject('PUT', `/v1/packs/${pack.id}`, { token: a.ownerToken, body: { image_ref: loud.ref } })
    expect(res.status).toBe(409)
    expect(res.body.error).toMatchObject({ code: 'pack_in_use', details: { other_org_roles: 1 } })
    expect((await h.inject('GET', `/v1/packs/${pack.id}`, { token: a.ownerToken })).body.image_digest).toBe(quiet.digest)
    expect(await content.has(loud.digest)).toBe(false)
  })

  it('with a push registry, uploads, re-uploads and clones push images whose image_ref pulls back the same tree', async () => {
    h.deps.packRegistry = pushing
    try {
      const a = await h.newOrg()
      const b = await h.newOrg()
      const up = await upload(a.ownerToken, { archive: await demoPack({ name: 'pushed' }), visibility: 'community' })
      expect(up.status).toBe(201)
      const repo = `${registry.host}/corral-${d.name}/${a.orgId.toLowerCase()}/pushed`
      expect(up.body.image_ref).toMatch(new RegExp(`^${repo.replaceAll('.', '\\.')}@sha256:[0-9a-f]{64}$`))
      const back = await pullPackImage(pushing, new PackContent(join(scratch, d.name, `check-${Date.now()}`)), up.body.image_ref)
      back.ingested.release()
      expect(back.ingested.digest).toBe(up.body.image_digest)
      // The version tag names the same manifest.
      expect(`${repo}@${(await client.getManifest(parseImageRef(`${repo}:1.0.0`))).digest}`).toBe(up.body.image_ref)

      const re = await upload(a.ownerToken, { archive: await demoPack({ name: 'pushed', version: '1.1.0' }) }, `/v1/packs/${up.body.id}/upload`, 'PUT')
      expect(re.status).toBe(200)
      expect(re.body.image_ref).not.toBe(up.body.image_ref)
      expect(`${repo}@${(await client.getManifest(parseImageRef(`${repo}:1.1.0`))).digest}`).toBe(re.body.image_ref)

      const clone = await h.inject('POST', `/v1/packs/${up.body.id}/clone`, { token: b.ownerToken, body: { name: 'mycopy' } })
      expect(clone.status).toBe(201)
      expect(clone.body.image_ref).toMatch(new RegExp(`^${registry.host.replaceAll('.', '\\.')}/corral-${d.name}/${b.orgId.toLowerCase()}/mycopy@sha256:`))
      expect(clone.body.image_digest).toBe(re.body.image_digest)
    } finally {
      h.deps.packRegistry = pullOnly
    }
  })

  it("pulls from the push registry's namespace only the caller's own images or the image_ref of a pack it can see", async () => {
    h.deps.packRegistry = pushing
    try {
      const a = await h.newOrg()
      const b = await h.newOrg()
      const secret = await upload(b.ownerToken, { archive: await demoPack({ name: 'secret' }) })
      const shared = await upload(b.ownerToken, { archive: await demoPack({ name: 'shared' }), visibility: 'community' })
      const mine = await upload(a.ownerToken, { archive: await demoPack({ name: 'mine' }) })
      expect([secret.status, shared.status, mine.status]).toEqual([201, 201, 201])
      const repoOf = (orgId: string, name: string) => `${registry.host}/corral-${d.name}/${orgId.toLowerCase()}/${name}`
      const refused = async (method: 'POST' | 'PUT', url: string, imageRef: string) => {
        const res = await h.inject(method, url, { token: a.ownerToken, body: { image_ref: imageRef } })
        expect([res.status, res.body.error?.code], imageRef).toEqual([400, 'validation_error'])
        expect(res.body.error.details.fields.image_ref).toMatch(/belongs to another organisation/)
      }
      // Org B's private pack, by tag or by its exact reference: refused, and nothing is stored.
      const before = trees()
      await refused('POST', '/v1/packs', `${repoOf(b.orgId, 'secret')}:1.0.0`)
      await refused('POST', '/v1/packs', secret.body.image_ref)
      // A community pack by tag is refused too; by its image_ref (what A can see) it is pulled.
      await refused('POST', '/v1/packs', `${repoOf(b.orgId, 'shared')}:1.0.0`)
      expect(trees()).toEqual(before)
      const viaShared = await create(a.ownerToken, { image_ref: shared.body.image_ref })
      expect(viaShared.status).toBe(201)
      expect(viaShared.body.image_digest).toBe(shared.body.image_digest)
      // The caller's own images pull by tag or digest.
      await h.inject('DELETE', `/v1/packs/${mine.body.id}`, { token: a.ownerToken })
      const own = await create(a.ownerToken, { image_ref: `${repoOf(a.orgId, 'mine')}:1.0.0` })
      expect(own.status).toBe(201)
      // PUT image_ref is held to the same rule; and once B deletes its community pack, its image is refused.
      await refused('PUT', `/v1/packs/${viaShared.body.id}`, `${repoOf(b.orgId, 'shared')}:1.0.0`)
      await h.inject('DELETE', `/v1/packs/${viaShared.body.id}`, { token: a.ownerToken })
      expect((await h.inject('DELETE', `/v1/packs/${shared.body.id}`, { token: b.ownerToken })).status).toBe(200)
      await refused('POST', '/v1/packs', shared.body.image_ref)
    } finally {
      h.deps.packRegistry = pullOnly
    }
  })

  it('an unreachable push registry fails the upload with 502 and keeps nothing', async () => {
    const port = await freePort()
    h.deps.packRegistry = registrySettingsFromEnv({ CORRAL_PACK_REGISTRY: `127.0.0.1:${port}/x` })
    try {
      const { ownerToken } = await h.newOrg()
      const before = trees()
      const res = await upload(ownerToken, { archive: await demoPack({ name: 'nowhere', version: '7.7.7' }) })
      expect(res.status).toBe(502)
      expect(res.body.error.code).toBe('registry_unavailable')
      expect(trees()).toEqual(before)
      expect((await h.inject('GET', '/v1/packs?name=nowhere', { token: ownerToken })).body.packs).toEqual([])
    } finally {
      h.deps.packRegistry = pullOnly
    }
  })
})
