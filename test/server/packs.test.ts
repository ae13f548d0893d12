// /v1/packs on the real app, a real store (SQLite, and Postgres when configured) and a real content
// store on disk: upload (multipart), re-upload, list/show with community visibility across orgs,
// metadata PUT, delete with the in-use guard and content collection, clone, every refusal, every
// content_pack_* event with its detail keys, role pack_ids validation, permissions and posture.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PackContent } from '../../src/packs/content.js'
import { testDialects } from '../helpers/dialects.js'
import { CAPS, demoPack, tgzOf } from '../packs/archives.js'
import { tableWorkspaceControl } from './agent-roles-fixtures.js'
import { createHarness, type Harness } from './harness.js'

const contentRoot = mkdtempSync(join(tmpdir(), 'corral-pack-routes-'))
afterAll(() => rmSync(contentRoot, { recursive: true, force: true }))

/** A multipart/form-data body: file parts are Buffers, fields strings. */
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

for (const d of testDialects()) describe(`pack routes [${d.name}]`, () => {
  let h: Harness
  let control: ReturnType<typeof tableWorkspaceControl>
  let content: PackContent
  beforeAll(async () => {
    h = await createHarness({ open: d.open })
    control = tableWorkspaceControl(h.store)
    h.deps.workspaceControl = control
    content = new PackContent(join(contentRoot, d.name), { maxCompressedBytes: 64 * 1024, maxUncompressedBytes: 1024 * 1024, maxEntries: 100 })
    h.deps.packContent = content
  })
  afterAll(() => h.close())

  const upload = async (token: string, parts: Record<string, string | Buffer>, url = '/v1/packs/upload', method: 'POST' | 'PUT' = 'POST') => {
    const { payload, headers } = multipart(parts)
    const res = await h.app.inject({ method, url, payload, headers: { ...headers, authorization: `Bearer ${token}` } })
    return { status: res.statusCode, body: res.json() }
  }
  const events = async (token: string, types: string) => {
    await h.audit.flush()
    const page = await h.inject('GET', `/v1/audit?filter=event_type=${types}&order=asc`, { token })
    expect(page.status).toBe(200)
    return page.body.events as Array<{ event_type: string; user_id: string; category: string; actor: string; detail: Record<string, unknown> }>
  }
  const trees = () => readdirSync(content.root).filter((n) => n.startsWith('sha256-'))
  const role = async (token: string, name: string, packIds: string[]) => {
    const prov = await h.inject('POST', '/v1/providers', { token, body: { name: `p-${name}`, kind: 'anthropic', domain: 'api.anthropic.com' } })
    return h.inject('POST', '/v1/agent-roles', { token, body: { name, provider_id: prov.body.id, pack_ids: packIds } })
  }

  it('uploads a pack and returns the spec Pack object', async () => {
    const { ownerToken, ownerId, orgId } = await h.newOrg()
    const res = await upload(ownerToken, { archive: await demoPack({ prefix: 'demo' }) })
    expect(res.status).toBe(201)
    const pack = res.body
    expect(pack).toMatchObject({
      org_id: orgId, name: 'demo', display_name: 'demo', description: 'A demo pack', version: '1.0.0', tier: 'community', visibility: 'org',
      category: 'testing', capabilities: CAPS, image_origin: 'upload', owned: true,
    })
    expect(pack.id).toMatch(/^pack_/)
    expect(pack.image_digest).toMatch(/^sha256:[0-9a-f]{64}$/)
    expect(pack.size_bytes).toBeGreaterThan(0)
    expect(pack).not.toHaveProperty('manifest')
    expect(pack).not.toHaveProperty('created_by')
    expect(await content.has(pack.image_digest)).toBe(true)
    expect((await h.inject('GET', `/v1/packs/${pack.id}`, { token: ownerToken })).body).toEqual(pack)
    const ev = await events(ownerToken, 'content_pack_created')
    expect(ev).toHaveLength(1)
    expect(ev[0]).toMatchObject({ user_id: ownerId, category: 'audit', actor: 'control-plane' })
    expect(ev[0]!.detail).toEqual({ resource_id: pack.id, name: 'demo', display_name: 'demo', version: '1.0.0', visibility: 'org', tier: 'community', image_origin: 'upload' })
    // The store knows the manifest (the workspace controller reads the agent command from it).
    expect((await h.store.packs.findVisible(orgId, [pack.id]))[0]!.manifest.agent).toEqual({ command: ['./bin/agent', '--fast'] })
  })

  it('shows community packs to every org, without their org_id, and keeps private ones private', async () => {
    const a = await h.newOrg()
    const b = await h.newOrg()
    const shared = (await upload(a.ownerToken, { visibility: 'community', archive: await demoPack({ name: 'shared' }) })).body
    const priv = (await upload(a.ownerToken, { archive: await demoPack({ name: 'private' }) })).body
    const mine = (await upload(b.ownerToken, { archive: await demoPack({ name: 'mine' }) })).body
    expect(shared.visibility).toBe('community')

    const seen = await h.inject('GET', '/v1/packs', { token: b.ownerToken })
    const byId = new Map<string, Record<string, unknown>>(seen.body.packs.map((p: { id: string }) => [p.id, p]))
    expect(byId.get(mine.id)).toMatchObject({ owned: true, org_id: b.orgId })
    expect(byId.get(shared.id)).toMatchObject({ owned: false, name: 'shared' })
    expect(byId.get(shared.id)).not.toHaveProperty('org_id')
    expect(byId.has(priv.id)).toBe(false)
    expect((await h.inject('GET', '/v1/packs?owned=true', { token: b.ownerToken })).body.packs.map((p: { id: string }) => p.id)).toEqual([mine.id])
    expect((await h.inject('GET', '/v1/packs?owned=false', { token: b.ownerToken })).body.packs.map((p: { id: string }) => p.id)).toContain(shared.id)
    expect((await h.inject('GET', '/v1/packs?owned=false', { token: b.ownerToken })).body.packs.map((p: { id: string }) => p.id)).not.toContain(mine.id)
    expect((await h.inject('GET', '/v1/packs?name=mine', { token: b.ownerToken })).body.packs).toHaveLength(1)
    expect((await h.inject('GET', '/v1/packs?bogus=1', { token: b.ownerToken })).status).toBe(400)
    // Registry-origin creation (test/packs/registry-routes.test.ts): no registry is allowed without configuration.
    const registry = await h.inject('POST', '/v1/packs', { token: b.ownerToken, body: { image_ref: 'registry.example.com/x:1' } })
    expect(registry.status).toBe(400)
    expect(registry.body.error.details.fields.image_ref).toMatch(/not an allowed pack registry/)

    const other = await h.inject('GET', `/v1/packs/${shared.id}`, { token: b.ownerToken })
    expect(other.body).toMatchObject({ id: shared.id, owned: false })
    expect(other.body.org_id).toBeUndefined()
    expect((await h.inject('GET', `/v1/packs/${priv.id}`, { token: b.ownerToken })).status).toBe(404)
    // Visible is not writable: another org's community pack is refused, a private one is not found.
    for (const [method, url, body] of [['PUT', `/v1/packs/${shared.id}`, { display_name: 'x' }], ['DELETE', `/v1/packs/${shared.id}`, undefined]] as const) {
      const res = await h.inject(method, url, { token: b.ownerToken, ...(body ? { body } : {}) })
      expect(res.status).toBe(403)
      expect(res.body.error.code).toBe('permission_denied')
    }
    expect((await upload(b.ownerToken, { archive: await demoPack({ name: 'shared' }) }, `/v1/packs/${shared.id}/upload`, 'PUT')).status).toBe(403)
    expect((await h.inject('DELETE', `/v1/packs/${priv.id}`, { token: b.ownerToken })).status).toBe(404)
  })

  it('refuses bad uploads with clear errors and leaves no content behind', async () => {
    const { ownerToken } = await h.newOrg()
    const before = trees().sort()
    const expectError = async (res: { status: number; body: any }, status: number, code: string, field?: string) => {
      expect(res.status, JSON.stringify(res.body)).toBe(status)
      expect(res.body.error.code).toBe(code)
      if (field) expect(res.body.error.details.fields).toHaveProperty(field)
    }
    await expectError(await h.inject('POST', '/v1/packs/upload', { token: ownerToken, body: { archive: 'x' } }), 415, 'unsupported_media_type')
    await expectError(await upload(ownerToken, { visibility: 'org' }), 400, 'validation_error', 'archive')
    await expectError(await upload(ownerToken, { visibility: 'everyone', archive: await demoPack({ name: 'vis' }) }), 400, 'validation_error', 'visibility')
    await expectError(await upload(ownerToken, { archive: await demoPack({ name: 'extra' }), colour: 'red' }), 400, 'validation_error', 'colour')
    await expectError(await upload(ownerToken, { file: await demoPack({ name: 'wrongpart' }) }), 400, 'validation_error', 'file')
    await expectError(await upload(ownerToken, { archive: Buffer.from('not a tarball') }), 400, 'validation_error', 'archive')
    await expectError(await upload(ownerToken, { archive: await tgzOf([{ name: '../evil', body: 'x' }, { name: 'pack.yaml', body: 'name: a\nversion: "1"\n' }]) }), 400, 'validation_error', 'archive')
    await expectError(await upload(ownerToken, { archive: await tgzOf([{ name: 'pack.yaml', body: 'name: 9\n' }]) }), 400, 'validation_error', 'version')
    const badCaps = await upload(ownerToken, { archive: await tgzOf([{ name: 'pack.yaml', body: 'name: c\nversion: "1"\ncapabilities: caps.yaml\n' }, { name: 'caps.yaml', body: '- name: x\n' }]) })
    await expectError(badCaps, 400, 'invalid_capabilities')
    expect(Array.isArray(badCaps.body.error.details.diagnostics)).toBe(true)
    const { randomBytes } = await import('node:crypto')
    await expectError(await upload(ownerToken, { archive: await tgzOf([{ name: 'pack.yaml', body: 'name: big\nversion: "1"\n' }, { name: 'noise', body: randomBytes(96 * 1024) }]) }), 413, 'payload_too_large')
    // Bodies that are not well-formed multipart, or that end inside the archive part, are refused (never a hang or a 500).
    const raw = (payload: string) => h.app.inject({ method: 'POST', url: '/v1/packs/upload', payload, headers: { 'content-type': 'multipart/form-data; boundary=abc', authorization: `Bearer ${ownerToken}` } })
    const cut = await raw('--abc\r\ncontent-disposition: form-data; name="archive"; filename="a.tgz"\r\n\r\nxxxx')
    expect(cut.statusCode).toBe(400)
    expect(cut.json().error.details.fields).toHaveProperty('archive')
    const cutValid = await demoPack({ name: 'cut' })
    const cutMid = await h.app.inject({
      method: 'POST', url: '/v1/packs/upload', headers: { 'content-type': 'multipart/form-data; boundary=abc', authorization: `Bearer ${ownerToken}` },
      payload: Buffer.concat([Buffer.from('--abc\r\ncontent-disposition: form-data; name="archive"; filename="a.tgz"\r\n\r\n'), cutValid.subarray(0, cutValid.length - 10)]),
    })
    expect(cutMid.statusCode).toBe(400)
    expect((await raw('garbage')).statusCode).toBe(400)
    expect((await raw('--abc\r\nbroken header\r\n\r\nx\r\n--abc--\r\n')).statusCode).toBe(400)
    const twoFiles = multipart({ archive: await demoPack({ name: 'two' }) })
    const doubled = Buffer.concat([twoFiles.payload.subarray(0, twoFiles.payload.lastIndexOf('--' + twoFiles.headers['content-type']!.split('boundary=')[1] + '--')), twoFiles.payload])
    const two = await h.app.inject({ method: 'POST', url: '/v1/packs/upload', payload: doubled, headers: { ...twoFiles.headers, authorization: `Bearer ${ownerToken}` } })
    expect(two.statusCode).toBe(400)
    expect(two.json().error.details.fields).toHaveProperty('archive')
    expect(trees().sort()).toEqual(before)
    expect(readdirSync(content.root).filter((n) => n.startsWith('.ingest-'))).toEqual([])

    // A name already used in the org is a conflict; the content it brought is not kept.
    expect((await upload(ownerToken, { archive: await demoPack({ name: 'dup' }) })).status).toBe(201)
    const afterFirst = trees().sort()
    await expectError(await upload(ownerToken, { archive: await demoPack({ name: 'dup', version: '9' }) }), 409, 'conflict', 'name')
    expect(trees().sort()).toEqual(afterFirst)
  })

  it('re-uploads an uploaded pack: new content, reupload event, idle workspaces of attaching roles restart', async () => {
    const a = await h.newOrg()
    const b = await h.newOrg()
    const pack = (await upload(a.ownerToken, { visibility: 'community', archive: await demoPack({ name: 'tools' }) })).body
    const ownRole = (await role(a.ownerToken, 'uses-tools', [pack.id])).body
    const otherRole = (await role(b.ownerToken, 'also-tools', [pack.id])).body
    expect(otherRole.pack_ids).toEqual([pack.id])
    control.restarts.length = 0

    const next = await upload(a.ownerToken, { archive: await demoPack({ name: 'tools', version: '2.0.0', manifest: 'name: tools\nversion: "2.0.0"\ndisplay_name: Tools v2\n' }) }, `/v1/packs/${pack.id}/upload`, 'PUT')
    expect(next.status).toBe(200)
    expect(next.body).toMatchObject({ id: pack.id, version: '2.0.0', display_name: 'Tools v2', visibility: 'community', image_origin: 'upload' })
    // What the new pack.yaml does not state is cleared, not kept from the old one.
    expect(next.body.description).toBeUndefined()
    expect(next.body.capabilities).toBeUndefined()
    expect(next.body.image_digest).not.toBe(pack.image_digest)
    expect(await content.has(next.body.image_digest)).toBe(true)
    expect(await content.has(pack.image_digest)).toBe(false) // no row references the old tree any more
    expect(control.restarts.sort()).toEqual([ownRole.id, otherRole.id].sort())
    const ev = await events(a.ownerToken, 'content_pack_updated')
    expect(ev.map((e) => e.detail)).toEqual([{ resource_id: pack.id, name: 'tools', version: '2.0.0', image_ref: '', kind: 'reupload' }])

    const renamed = await upload(a.ownerToken, { archive: await demoPack({ name: 'other' }) }, `/v1/packs/${pack.id}/upload`, 'PUT')
    expect(renamed.status).toBe(400)
    expect(renamed.body.error.details.fields).toHaveProperty('name')
    expect((await upload(a.ownerToken, { archive: await demoPack({ name: 'tools' }) }, '/v1/packs/pack_missing/upload', 'PUT')).status).toBe(404)
    const clone = (await h.inject('POST', `/v1/packs/${pack.id}/clone`, { token: b.ownerToken, body: {} })).body
    const refused = await upload(b.ownerToken, { archive: await demoPack({ name: 'tools' }) }, `/v1/packs/${clone.id}/upload`, 'PUT')
    expect(refused.status).toBe(409)
    expect(refused.body.error).toMatchObject({ code: 'pack_not_reuploadable', details: { image_origin: 'clone' } })
  })

  it('PUT edits metadata; visibility flips are their own event kind; image_ref is for registry packs only', async () => {
    const a = await h.newOrg()
    const b = await h.newOrg()
    const pack = (await upload(a.ownerToken, { archive: await demoPack({ name: 'meta' }) })).body
    const edited = await h.inject('PUT', `/v1/packs/${pack.id}`, { token: a.ownerToken, body: { display_name: 'Meta', description: null, category: 'docs', suggested_packs: ' git, python ,git' } })
    expect(edited.status).toBe(200)
    expect(edited.body).toMatchObject({ display_name: 'Meta', category: 'docs', suggested_packs: 'git,python', version: '1.0.0' })
    expect(edited.body.description).toBeUndefined()
    const flipped = await h.inject('PUT', `/v1/packs/${pack.id}`, { token: a.ownerToken, body: { visibility: 'community' } })
    expect(flipped.body.visibility).toBe('community')
    const ev = await events(a.ownerToken, 'content_pack_updated')
    expect(ev.map((e) => e.detail)).toEqual([
      { resource_id: pack.id, name: 'meta', version: '1.0.0', image_ref: '', kind: 'metadata', patched_fields: ['category', 'description', 'display_name', 'suggested_packs'] },
      { resource_id: pack.id, name: 'meta', version: '1.0.0', image_ref: '', kind: 'visibility', patched_fields: ['visibility'] },
    ])
    const bad = async (body: unknown, field: string) => {
      const res = await h.inject('PUT', `/v1/packs/${pack.id}`, { token: a.ownerToken, body })
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(res.body.error.details.fields).toHaveProperty(field)
    }
    await bad({ image_ref: 'registry.example.com/meta:1' }, 'image_ref')
    await bad({ tier: 'verified' }, 'tier')
    await bad({ visibility: 'public' }, 'visibility')
    await bad({ suggested_packs: 'ok, not ok' }, 'suggested_packs')
    expect((await h.inject('PUT', `/v1/packs/${pack.id}`, { token: a.ownerToken, body: {} })).status).toBe(400)

    // Another org's role attaches it now: making it private again would break that role.
    await role(b.ownerToken, 'borrower', [pack.id])
    const guarded = await h.inject('PUT', `/v1/packs/${pack.id}`, { token: a.ownerToken, body: { visibility: 'org' } })
    expect(guarded.status).toBe(409)
    expect(guarded.body.error).toMatchObject({ code: 'pack_in_use', details: { other_org_roles: 1 } })
  })

  it('DELETE is refused while a non-archived role attaches the pack; content goes with the last reference', async () => {
    const { ownerToken, ownerId } = await h.newOrg()
    const pack = (await upload(ownerToken, { archive: await demoPack({ name: 'del' }) })).body
    const user = (await role(ownerToken, 'user', [pack.id])).body
    const refused = await h.inject('DELETE', `/v1/packs/${pack.id}`, { token: ownerToken })
    expect(refused.status).toBe(409)
    expect(refused.body.error).toMatchObject({ code: 'pack_in_use', details: { roles: [user.id], other_org_roles: 0 } })
    expect((await h.inject('POST', `/v1/agent-roles/${user.id}/archive`, { token: ownerToken })).status).toBe(200)

    // A clone shares the tree: deleting the source keeps it for the clone.
    const clone = (await h.inject('POST', `/v1/packs/${pack.id}/clone`, { token: ownerToken, body: { name: 'del-copy' } })).body
    expect(clone.image_digest).toBe(pack.image_digest)
    expect((await h.inject('DELETE', `/v1/packs/${pack.id}`, { token: ownerToken })).body).toEqual({ status: 'deleted' })
    expect((await h.inject('GET', `/v1/packs/${pack.id}`, { token: ownerToken })).status).toBe(404)
    expect(await content.has(pack.image_digest)).toBe(true)
    expect((await h.inject('DELETE', `/v1/packs/${clone.id}`, { token: ownerToken })).status).toBe(200)
    expect(await content.has(pack.image_digest)).toBe(false)
    expect((await h.inject('DELETE', `/v1/packs/${clone.id}`, { token: ownerToken })).status).toBe(404)
    const ev = await events(ownerToken, 'content_pack_deleted')
    expect(ev.map((e) => e.detail)).toEqual([
      { resource_id: pack.id, name: 'del', version: '1.0.0' },
      { resource_id: clone.id, name: 'del-copy', version: '1.0.0' },
    ])
    expect(ev[0]!.user_id).toBe(ownerId)
  })

  it('clones a visible pack into a private org pack', async () => {
    const a = await h.newOrg()
    const b = await h.newOrg()
    const source = (await upload(a.ownerToken, { visibility: 'community', archive: await demoPack({ name: 'origin' }) })).body
    const priv = (await upload(a.ownerToken, { archive: await demoPack({ name: 'hidden' }) })).body
    const res = await h.inject('POST', `/v1/packs/${source.id}/clone`, { token: b.ownerToken })
    expect(res.status).toBe(201)
    expect(res.body).toMatchObject({
      org_id: b.orgId, owned: true, name: 'origin', display_name: source.display_name, version: '1.0.0', visibility: 'org', tier: 'community',
      image_origin: 'clone', image_digest: source.image_digest, size_bytes: source.size_bytes, capabilities: CAPS,
    })
    expect(res.body.id).not.toBe(source.id)
    expect((await h.store.packs.findVisible(b.orgId, [res.body.id]))[0]!.manifest.agent?.command).toEqual(['./bin/agent', '--fast'])
    const ev = await events(b.ownerToken, 'content_pack_cloned')
    expect(ev.map((e) => e.detail)).toEqual([{ resource_id: res.body.id, name: 'origin', source_pack_id: source.id, source_name: 'origin' }])

    const again = await h.inject('POST', `/v1/packs/${source.id}/clone`, { token: b.ownerToken, body: {} })
    expect(again.status).toBe(409)
    expect(again.body.error.details.fields).toHaveProperty('name')
    expect((await h.inject('POST', `/v1/packs/${source.id}/clone`, { token: b.ownerToken, body: { name: 'origin-2' } })).status).toBe(201)
    expect((await h.inject('POST', `/v1/packs/${source.id}/clone`, { token: b.ownerToken, body: { name: '1bad' } })).status).toBe(400)
    expect((await h.inject('POST', `/v1/packs/${priv.id}/clone`, { token: b.ownerToken, body: {} })).status).toBe(404)

    // The source's owner deletes it: the clones keep working (same content, their own rows).
    expect((await h.inject('DELETE', `/v1/packs/${source.id}`, { token: a.ownerToken })).status).toBe(200)
    expect(await content.has(source.image_digest)).toBe(true)
  })

  it("a re-upload may not make a pack an agent under other orgs' roles, nor give a role of the org two agents", async () => {
    const a = await h.newOrg()
    const b = await h.newOrg()
    const plainTgz = (name: string, version: string) => tgzOf([{ name: 'pack.yaml', body: `name: ${name}\nversion: "${version}"\n` }])
    const reupload = (token: string, id: string, archive: Buffer) => upload(token, { archive }, `/v1/packs/${id}/upload`, 'PUT')
    const helper = (await upload(a.ownerToken, { visibility: 'community', archive: await plainTgz('helper', '1') })).body
    const theirAgent = (await upload(b.ownerToken, { archive: await demoPack({ name: 'their-agent' }) })).body
    const theirRole = (await role(b.ownerToken, 'their-role', [theirAgent.id, helper.id]))
    expect(theirRole.status).toBe(201)
    const before = trees().sort()

    // Adding an agent while another org's role attaches the pack: refused, nothing changes or stays behind.
    const sneaky = await reupload(a.ownerToken, helper.id, await demoPack({ name: 'helper', version: '2' }))
    expect(sneaky.status).toBe(409)
    expect(sneaky.body.error).toMatchObject({ code: 'pack_in_use', details: { other_org_roles: 1 } })
    expect(sneaky.body.error.message).toMatch(/agent/)
    expect((await h.inject('GET', `/v1/packs/${helper.id}`, { token: a.ownerToken })).body.image_digest).toBe(helper.image_digest)
    expect(trees().sort()).toEqual(before)

    // Own roles: the one-agent rule of pack_ids applies to the re-uploaded pack.
    const ownAgent = (await upload(a.ownerToken, { archive: await demoPack({ name: 'own-agent' }) })).body
    const quiet = (await upload(a.ownerToken, { archive: await plainTgz('quiet', '1') })).body
    const ownRole = (await role(a.ownerToken, 'own-role', [ownAgent.id, quiet.id])).body
    const second = await reupload(a.ownerToken, quiet.id, await demoPack({ name: 'quiet', version: '2' }))
    expect(second.status).toBe(409)
    expect(second.body.error).toMatchObject({ code: 'pack_in_use', details: { roles: [ownRole.id] } })
    // With no other agent in the org's roles (and no other org attaching it), adding one is fine.
    await h.inject('PATCH', `/v1/agent-roles/${ownRole.id}`, { token: a.ownerToken, body: { pack_ids: [quiet.id] } })
    expect((await reupload(a.ownerToken, quiet.id, await demoPack({ name: 'quiet', version: '2' }))).status).toBe(200)

    // Once a pack is an agent pack, its owner may change its agent under other orgs' roles.
    const agentPack = (await upload(a.ownerToken, { visibility: 'community', archive: await demoPack({ name: 'shared-agent' }) })).body
    expect((await role(b.ownerToken, 'uses-shared-agent', [agentPack.id])).status).toBe(201)
    const changed = await reupload(a.ownerToken, agentPack.id, await demoPack({
      name: 'shared-agent', manifest: 'name: shared-agent\nversion: "2"\nagent:\n  command: [./bin/agent, --slow]\n',
    }))
    expect(changed.status).toBe(200)
  })

  it('concurrent re-uploads of one pack leave only the winning tree', async () => {
    const a = await h.newOrg()
    const pack = (await upload(a.ownerToken, { archive: await demoPack({ name: 'racing' }) })).body
    const before = trees().filter((t) => t !== pack.image_digest.replace(':', '-'))
    const results = await Promise.all(['2', '3', '4'].map(async (v) => upload(a.ownerToken, { archive: await demoPack({ name: 'racing', version: v }) }, `/v1/packs/${pack.id}/upload`, 'PUT')))
    expect(results.map((r) => r.status)).toEqual([200, 200, 200])
    const final = (await h.inject('GET', `/v1/packs/${pack.id}`, { token: a.ownerToken })).body
    expect(trees().sort()).toEqual([...before, final.image_digest.replace(':', '-')].sort())
  })

  it('role pack_ids must be visible packs, with at most one agent among them', async () => {
    const a = await h.newOrg()
    const b = await h.newOrg()
    const agentA = (await upload(a.ownerToken, { archive: await demoPack({ name: 'agent-a' }) })).body
    const agentB = (await upload(a.ownerToken, { archive: await demoPack({ name: 'agent-b' }) })).body
    const plain = (await upload(a.ownerToken, { archive: await tgzOf([{ name: 'pack.yaml', body: 'name: plain\nversion: "1"\n' }]) })).body
    const foreignPrivate = (await upload(b.ownerToken, { archive: await demoPack({ name: 'theirs' }) })).body
    const foreignShared = (await upload(b.ownerToken, { visibility: 'community', archive: await tgzOf([{ name: 'pack.yaml', body: 'name: shared\nversion: "1"\n' }]) })).body

    const ok = await role(a.ownerToken, 'ok', [agentA.id, plain.id, foreignShared.id])
    expect(ok.status).toBe(201)
    const unknown = await role(a.ownerToken, 'unknown', ['pack_nope', foreignPrivate.id])
    expect(unknown.status).toBe(400)
    expect(unknown.body.error.details.fields.pack_ids).toBe(`has unknown packs: pack_nope, ${foreignPrivate.id}`)
    const twoAgents = await role(a.ownerToken, 'two', [agentA.id, agentB.id])
    expect(twoAgents.status).toBe(400)
    expect(twoAgents.body.error.details.fields.pack_ids).toMatch(/at most one pack that provides an agent \(agent-a, agent-b do\)/)
    const sameName = (await upload(b.ownerToken, { visibility: 'community', archive: await tgzOf([{ name: 'pack.yaml', body: 'name: plain\nversion: "2"\n' }]) })).body
    const clash = await role(a.ownerToken, 'clash', [plain.id, sameName.id])
    expect(clash.status).toBe(400)
    expect(clash.body.error.details.fields.pack_ids).toMatch(/two packs named plain/)
    const patched = await h.inject('PATCH', `/v1/agent-roles/${ok.body.id}`, { token: a.ownerToken, body: { pack_ids: [agentA.id, agentB.id] } })
    expect(patched.status).toBe(400)
    expect(patched.body.error.details.fields).toHaveProperty('pack_ids')
    expect((await h.inject('PATCH', `/v1/agent-roles/${ok.body.id}`, { token: a.ownerToken, body: { pack_ids: [agentB.id] } })).body.pack_ids).toEqual([agentB.id])
  })

  it('writes need caps:write, reads any member; writes are refused in an inactive posture; no content store is a 503', async () => {
    const { orgId, ownerToken } = await h.newOrg()
    const member = await h.member(orgId, 'member')
    const readOnly = await h.key(orgId, 'read_only')
    const pack = (await upload(ownerToken, { archive: await demoPack({ name: 'perm' }) })).body
    for (const token of [member.token, readOnly.value]) {
      const denied = await upload(token, { archive: await demoPack({ name: 'perm2' }) })
      expect(denied.status).toBe(403)
      expect(denied.body.error.code).toBe('permission_denied')
      expect((await h.inject('POST', `/v1/packs/${pack.id}/clone`, { token, body: { name: 'c' } })).status).toBe(403)
      expect((await h.inject('DELETE', `/v1/packs/${pack.id}`, { token })).status).toBe(403)
      expect((await h.inject('GET', '/v1/packs', { token })).status).toBe(200)
      expect((await h.inject('GET', `/v1/packs/${pack.id}`, { token })).status).toBe(200)
    }
    h.deps.packContent = null
    try {
      const off = await upload(ownerToken, { archive: await demoPack({ name: 'nostore' }) })
      expect(off.status).toBe(503)
      expect(off.body.error.code).toBe('service_unavailable')
    } finally {
      h.deps.packContent = content
    }
    await h.store.orgs.setPosture(orgId, 'past_due')
    const gated = await upload(ownerToken, { archive: await demoPack({ name: 'late' }) })
    expect(gated.status).toBe(403)
    expect(gated.body.error.code).toBe('tenant_inactive')
    expect((await h.inject('GET', '/v1/packs', { token: ownerToken })).status).toBe(200)
  })
})
