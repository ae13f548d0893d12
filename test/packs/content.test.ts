// The content store: deterministic digests, read-only trees, atomic placement, reuse by digest,
// and the pack.yaml / capabilities checks done at ingest.
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { CorralError } from '../../src/contract/index.js'
import { PackContent } from '../../src/packs/content.js'
import { CAPS, MANIFEST, demoPack, tgzOf } from './archives.js'

const base = mkdtempSync(join(tmpdir(), 'corral-content-'))
afterAll(() => rmSync(base, { recursive: true, force: true }))
let n = 0
const store = () => new PackContent(join(base, `s${++n}`, 'packs'))

async function refusal(content: PackContent, archive: Buffer): Promise<CorralError> {
  try {
    await content.ingest(archive)
  } catch (err) {
    expect(err).toBeInstanceOf(CorralError)
    return err as CorralError
  }
  throw new Error('expected a refusal')
}

describe(PackContent.name, () => {
  it('ingests a pack: manifest, capabilities text, digest, size and a read-only tree', async () => {
    const content = store()
    const out = await content.ingest(await demoPack())
    expect(out.manifest).toMatchObject({ name: 'demo', version: '1.0.0', capabilities_file: 'caps.yaml', agent: { command: ['./bin/agent', '--fast'] } })
    expect(out.capabilities).toBe(CAPS)
    expect(out.digest).toMatch(/^sha256:[0-9a-f]{64}$/)
    const dir = content.dir(out.digest)
    expect(dir).toBe(join(content.root, `sha256-${out.digest.slice(7)}`))
    expect(await content.has(out.digest)).toBe(true)
    const files = ['pack.yaml', 'caps.yaml', 'bin/agent', 'docs/readme.md']
    expect(out.sizeBytes).toBe(files.reduce((sum, f) => sum + statSync(join(dir, f)).size, 0))
    expect(statSync(join(dir, 'bin/agent')).mode & 0o777).toBe(0o555)
    expect(statSync(join(dir, 'docs/readme.md')).mode & 0o777).toBe(0o444)
    expect(statSync(join(dir, 'docs')).mode & 0o777).toBe(0o755)
    expect(readFileSync(join(dir, 'docs/readme.md'), 'utf8')).toBe('# demo\n')
    // Only the tree: no ingest leftovers.
    expect(readdirSync(content.root)).toEqual([`sha256-${out.digest.slice(7)}`])
  })

  it('gives the same digest for the same contents, whatever the archive looks like', async () => {
    const content = store()
    const a = await content.ingest(await demoPack())
    const b = await content.ingest(await demoPack({ prefix: 'wrapped' }))
    const entries = [
      { name: 'docs/readme.md', body: '# demo\n' },
      { name: 'bin/agent', body: '#!/bin/sh\necho hi\n', mode: 0o700 },
      { name: 'caps.yaml', body: CAPS, mode: 0o600 },
      { name: 'pack.yaml', body: 'name: demo\nversion: "1.0.0"\ndescription: A demo pack\ncategory: testing\ncapabilities: caps.yaml\nagent:\n  command: [./bin/agent, --fast]\n' },
    ]
    const c = await content.ingest(await tgzOf(entries))
    expect(b.digest).toBe(a.digest)
    expect(c.digest).toBe(a.digest)
    const other = await content.ingest(await demoPack({ version: '1.0.1' }))
    expect(other.digest).not.toBe(a.digest)
    const notExecutable = await content.ingest(await tgzOf(entries.map((e) => (e.name === 'bin/agent' ? { ...e, mode: 0o644 } : e))))
    expect(notExecutable.digest).not.toBe(a.digest)
    expect(readdirSync(content.root).sort()).toHaveLength(3)
  })

  it('ingests the same content concurrently into one tree', async () => {
    const content = store()
    const archive = await demoPack()
    const results = await Promise.all([content.ingest(archive), content.ingest(archive), content.ingest(archive)])
    expect(new Set(results.map((r) => r.digest)).size).toBe(1)
    expect(readdirSync(content.root)).toHaveLength(1)
  })

  it('refuses a bad pack.yaml, a missing or failing capabilities fragment, and cleans up', async () => {
    const content = store()
    const badManifest = await refusal(content, await tgzOf([{ name: 'pack.yaml', body: 'name: 1x\n' }]))
    expect(badManifest.code).toBe('validation_error')
    expect(badManifest.details?.fields).toHaveProperty('name')
    const missing = await refusal(content, await tgzOf([{ name: 'pack.yaml', body: `${MANIFEST}capabilities: caps.yaml\n` }]))
    expect(missing.details?.fields).toEqual({ capabilities: 'caps.yaml is not in the pack' })
    const linked = await refusal(content, await tgzOf([{ name: 'pack.yaml', body: `${MANIFEST}capabilities: c\n` }, { name: 'real', body: CAPS }, { name: 'c', type: 'symlink', linkname: 'real' }]))
    expect(linked.details?.fields).toHaveProperty('capabilities')
    const broken = await refusal(content, await tgzOf([{ name: 'pack.yaml', body: `${MANIFEST}capabilities: caps.yaml\n` }, { name: 'caps.yaml', body: '- name: api\n  type: http\n' }]))
    expect(broken.code).toBe('invalid_capabilities')
    expect(Array.isArray(broken.details?.diagnostics)).toBe(true)
    const yamlDir = await refusal(content, await tgzOf([{ name: 'pack.yaml/', type: 'directory' }]))
    expect(yamlDir.details?.fields).toHaveProperty('pack.yaml')
    expect(readdirSync(content.root)).toEqual([])
  })

  it('removes a tree only when unpinned and unused', async () => {
    const content = store()
    const out = await content.ingest(await demoPack())
    expect(await content.removeIfUnused(out.digest, async () => false)).toBe(false) // still pinned by the ingest
    out.release()
    out.release() // idempotent
    const clone = content.pin(out.digest)
    expect(await content.removeIfUnused(out.digest, async () => false)).toBe(false)
    clone()
    expect(await content.removeIfUnused(out.digest, async () => true)).toBe(false)
    expect(await content.has(out.digest)).toBe(true)
    expect(await content.removeIfUnused(out.digest, async () => false)).toBe(true)
    expect(await content.has(out.digest)).toBe(false)
  })

  it('removes trees and sweeps interrupted ingests', async () => {
    const content = store()
    const out = await content.ingest(await demoPack())
    await content.remove(out.digest)
    expect(await content.has(out.digest)).toBe(false)
    await content.sweep()
    expect(() => content.dir('sha256:../../etc')).toThrow(/not a pack digest/)
    expect(() => content.dir('md5:abc')).toThrow(/not a pack digest/)
  })
})
