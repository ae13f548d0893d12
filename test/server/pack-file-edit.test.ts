// PUT /v1/packs/{id}/files/{path} on the real app, a real store (SQLite, and Postgres when
// configured) and a real content store: one file replaced or added is stored like a re-upload of
// the edited tree (new image_digest, `content_pack_updated` kind `file_edit` with `edited`); every
// refusal (path escapes, links, pack.yaml that no longer parses, registry-origin packs, another
// org's pack, a body that is not octet-stream or too large) is the envelope and changes nothing.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PackContent } from '../../src/packs/content.js'
import { testDialects } from '../helpers/dialects.js'
import { demoPack, type TestEntry } from '../packs/archives.js'
import { tableWorkspaceControl } from './agent-roles-fixtures.js'
import { createHarness, type Harness } from './harness.js'

const contentRoot = mkdtempSync(join(tmpdir(), 'corral-pack-edit-'))
afterAll(() => rmSync(contentRoot, { recursive: true, force: true }))

for (const d of testDialects()) describe(`pack file edit [${d.name}]`, () => {
  let h: Harness
  let content: PackContent
  beforeAll(async () => {
    h = await createHarness({ open: d.open })
    h.deps.workspaceControl = tableWorkspaceControl(h.store)
    content = new PackContent(join(contentRoot, d.name), { maxCompressedBytes: 64 * 1024, maxUncompressedBytes: 1024 * 1024, maxEntries: 100 })
    h.deps.packContent = content
  })
  afterAll(() => h.close())

  const uploaded = async (token: string, name: string, extra: TestEntry[] = []) => {
    const archive = await demoPack({ name, extra })
    const boundary = 'corraledit'
    const payload = Buffer.concat([
      Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="archive"; filename="a.tgz"\r\ncontent-type: application/gzip\r\n\r\n`),
      archive, Buffer.from(`\r\n--${boundary}--\r\n`),
    ])
    const res = await h.app.inject({ method: 'POST', url: '/v1/packs/upload', payload, headers: { 'content-type': `multipart/form-data; boundary=${boundary}`, authorization: `Bearer ${token}` } })
    expect(res.statusCode).toBe(201)
    return res.json() as { id: string; image_digest: string; version: string }
  }
  const edit = async (token: string, id: string, path: string, body: string | Buffer, contentType = 'application/octet-stream') => {
    const res = await h.app.inject({ method: 'PUT', url: `/v1/packs/${id}/files/${encodeURIComponent(path)}`, payload: body, headers: { 'content-type': contentType, authorization: `Bearer ${token}` } })
    return { status: res.statusCode, body: res.json() }
  }
  const digestOf = async (token: string, id: string) => (await h.inject('GET', `/v1/packs/${id}`, { token })).body.image_digest as string
  const fileEdits = async (token: string) => {
    await h.audit.flush()
    const page = await h.inject('GET', '/v1/audit?filter=event_type=content_pack_updated&order=asc', { token })
    return (page.body.events as Array<{ category: string; actor: string; detail: Record<string, unknown> }>)
  }

  it('replaces a file and adds a new one; each is stored like a re-upload and audited as file_edit', async () => {
    const a = await h.newOrg()
    const pack = await uploaded(a.ownerToken, 'edited')
    const replaced = await edit(a.ownerToken, pack.id, 'docs/readme.md', '# edited\n')
    expect(replaced.status).toBe(200)
    expect(replaced.body.image_digest).not.toBe(pack.image_digest)
    expect(readFileSync(join(content.dir(replaced.body.image_digest), 'docs/readme.md'), 'utf8')).toBe('# edited\n')
    expect(readFileSync(join(content.dir(replaced.body.image_digest), 'bin/agent'), 'utf8')).toBe('#!/bin/sh\necho hi\n')
    const added = await edit(a.ownerToken, pack.id, 'notes/new/todo.txt', Buffer.from([0, 1, 2, 255]))
    expect(added.status).toBe(200)
    expect([...readFileSync(join(content.dir(added.body.image_digest), 'notes/new/todo.txt'))]).toEqual([0, 1, 2, 255])
    // The same edit again is the same content: the same digest.
    expect((await edit(a.ownerToken, pack.id, 'notes/new/todo.txt', Buffer.from([0, 1, 2, 255]))).body.image_digest).toBe(added.body.image_digest)
    const rows = await fileEdits(a.ownerToken)
    expect(rows.map((r) => r.detail)).toEqual([
      { resource_id: pack.id, name: 'edited', version: '1.0.0', image_ref: '', kind: 'file_edit', edited: 'docs/readme.md' },
      { resource_id: pack.id, name: 'edited', version: '1.0.0', image_ref: '', kind: 'file_edit', edited: 'notes/new/todo.txt' },
      { resource_id: pack.id, name: 'edited', version: '1.0.0', image_ref: '', kind: 'file_edit', edited: 'notes/new/todo.txt' },
    ])
    expect(rows.every((r) => r.category === 'audit' && r.actor === 'control-plane')).toBe(true)
  })

  it('an edited pack.yaml is validated like an upload: a version bump applies, a broken one changes nothing', async () => {
    const a = await h.newOrg()
    const pack = await uploaded(a.ownerToken, 'manifest-edit')
    const manifest = 'name: manifest-edit\nversion: "2.0.0"\ndescription: A demo pack\ncategory: testing\ncapabilities: caps.yaml\nagent:\n  command: [./bin/agent, --fast]\n'
    const bumped = await edit(a.ownerToken, pack.id, 'pack.yaml', manifest)
    expect(bumped.status).toBe(200)
    expect(bumped.body.version).toBe('2.0.0')
    for (const broken of ['name: [unterminated\n', 'name: another-name\nversion: "1.0.0"\n', 'version: "1.0.0"\n']) {
      const refused = await edit(a.ownerToken, pack.id, 'pack.yaml', broken)
      expect(refused.status).toBe(400)
      expect(refused.body.error.code).toBe('validation_error')
    }
    // A capabilities fragment that no longer compiles is refused as an upload's would be.
    const caps = await edit(a.ownerToken, pack.id, 'caps.yaml', 'rules: [')
    expect(caps.status).toBeGreaterThanOrEqual(400)
    expect(caps.status).toBeLessThan(500)
    expect(await digestOf(a.ownerToken, pack.id)).toBe(bumped.body.image_digest)
  })

  it('refuses escaping or ambiguous paths, links, directories and bad bodies, naming the path; nothing changes', async () => {
    const a = await h.newOrg()
    const pack = await uploaded(a.ownerToken, 'guarded', [
      { name: 'link-out', type: 'symlink', linkname: 'docs' },
    ])
    const before = await digestOf(a.ownerToken, pack.id)
    for (const path of ['../../etc/passwd', 'docs/../../x', '/etc/passwd', 'docs\\x', 'a\u0000b', 'link-out/readme.md', 'link-out', 'docs', '', `${'d/'.repeat(70)}f`]) {
      const refused = await edit(a.ownerToken, pack.id, path, 'x')
      expect(refused.status, path).toBe(400)
      expect(refused.body.error.code, path).toBe('validation_error')
      // A NUL byte is refused at the API's edge, before the route, naming the raw parameter.
      if (!path.includes('\u0000') && path !== '') expect(refused.body.error.details.fields, path).toHaveProperty('path')
    }
    expect((await edit(a.ownerToken, pack.id, 'docs/readme.md', 'x', 'application/json')).status).toBe(400)
    const text = await edit(a.ownerToken, pack.id, 'docs/readme.md', 'x', 'text/plain')
    expect(text.status).toBe(415)
    expect(text.body.error.code).toBe('unsupported_media_type')
    const tooBig = await edit(a.ownerToken, pack.id, 'big.bin', Buffer.alloc(9 * 1024 * 1024))
    expect(tooBig.status).toBe(413)
    expect(tooBig.body.error.code).toBe('payload_too_large')
    expect(await digestOf(a.ownerToken, pack.id)).toBe(before)
    expect(await fileEdits(a.ownerToken)).toEqual([])
  })

  it('only the owning org edits, only uploaded packs, only with caps:write', async () => {
    const a = await h.newOrg()
    const b = await h.newOrg()
    const pack = await uploaded(a.ownerToken, 'owned-edit')
    expect((await edit(b.ownerToken, pack.id, 'docs/readme.md', 'x')).status).toBe(404)
    expect((await edit(a.ownerToken, 'pack_missing', 'docs/readme.md', 'x')).status).toBe(404)
    const clone = (await h.inject('POST', `/v1/packs/${pack.id}/clone`, { token: a.ownerToken, body: { name: 'owned-edit-copy' } })).body
    expect(clone.image_origin).toBe('clone')
    const refused = await edit(a.ownerToken, clone.id, 'docs/readme.md', 'x')
    expect(refused.status).toBe(409)
    expect(refused.body.error.code).toBe('pack_not_reuploadable')
    const reader = await h.inject('POST', '/v1/api-keys', { token: a.ownerToken, body: { label: 'ro', permission_set: 'read_only' } })
    expect((await edit(reader.body.value, pack.id, 'docs/readme.md', 'x')).status).toBe(403)
    expect(await fileEdits(a.ownerToken)).toEqual([])
  })
})
