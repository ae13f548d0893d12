// Pack trees on the replica that needs them, against the real registry: a tree this replica lacks
// is pulled by the pack's image_ref (by digest), through the safe reader, and kept only when it
// hashes to the pack's image_digest; a tag that moved, a pack without image_ref and an unreachable
// registry end in one clear error (docs/packs.md "Pack trees on every replica").
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PackContent, PackTrees, registrySettingsFromEnv, type RegistrySettings } from '../../src/packs/index.js'
import { pushPackImage } from '../../src/packs/registry-image.js'
import { freePort, registryAvailable, startRegistry, type TestRegistry } from '../helpers/registry.js'
import { demoPack } from './archives.js'

const available = registryAvailable()

describe.skipIf(!available)('pack trees pulled by digest', () => {
  let registry: TestRegistry
  let settings: RegistrySettings
  let root: string
  let n = 0
  const store = () => new PackContent(join(root, `replica-${++n}`))

  beforeAll(async () => {
    registry = await startRegistry()
    settings = registrySettingsFromEnv({ CORRAL_PACK_REGISTRY: `${registry.host}/corral` })
    root = mkdtempSync(join(tmpdir(), 'corral-packtrees-'))
  })
  afterAll(async () => {
    await registry.stop()
    rmSync(root, { recursive: true, force: true })
  })

  /** Replica A stores and pushes a pack: its row as replica B reads it from the shared database. */
  async function uploaded(version: string, extra = 'hi') {
    const a = store()
    const ingested = await a.ingest(await demoPack({ version, extra: [{ name: 'notes.txt', body: extra }] }))
    ingested.release()
    const imageRef = await pushPackImage(settings, a, { orgId: 'org_a', name: 'demo', version, digest: ingested.digest })
    return { name: 'demo', image_digest: ingested.digest, image_ref: imageRef }
  }

  it('pulls a tree this replica lacks, verified against image_digest; concurrent ensures of one tree all resolve', async () => {
    const pack = await uploaded('1.0.0')
    const b = store()
    expect(await b.has(pack.image_digest)).toBe(false)
    const trees = new PackTrees(b, settings)
    await Promise.all([trees.ensure(pack), trees.ensure(pack), trees.ensure(pack)])
    expect(await b.has(pack.image_digest)).toBe(true)
    expect(readFileSync(join(b.dir(pack.image_digest), 'notes.txt'), 'utf8')).toBe('hi')
    expect(readFileSync(join(b.dir(pack.image_digest), 'pack.yaml'), 'utf8')).toContain('name: demo')
  })

  it('does not touch the registry for a tree that is here, or a pack without content', async () => {
    const pack = await uploaded('1.0.1')
    const here = store()
    const ingested = await here.ingest(await demoPack({ version: '1.0.1', extra: [{ name: 'notes.txt', body: 'hi' }] }))
    ingested.release()
    const dead = registrySettingsFromEnv({ CORRAL_PACK_REGISTRY: `127.0.0.1:${await freePort()}/corral` })
    await new PackTrees(here, dead).ensure(pack)
    await new PackTrees(here, dead).ensure({ name: 'pending', image_digest: null, image_ref: 'x' })
  })

  it('refuses content that is not the pack\'s: a tag that moved since the row was written', async () => {
    const first = await uploaded('2.0.0', 'first')
    await uploaded('2.0.0', 'second') // the same tag now names other content
    const byTag = { ...first, image_ref: `${registry.host}/corral/org_a/demo:2.0.0` }
    const b = store()
    const err = await new PackTrees(b, settings).ensure(byTag).catch((e: unknown) => e)
    expect(err).toMatchObject({ code: 'registry_unavailable', status: 502 })
    expect((err as Error).message).toMatch(/^pack demo \(sha256:[0-9a-f]{64}\) is not on this replica and .* now holds other content \(sha256:[0-9a-f]{64}\)$/)
    expect(existsSync(b.dir(first.image_digest))).toBe(false)
  })

  it('fails clearly without an image_ref and when the registry is unreachable', async () => {
    const pack = await uploaded('3.0.0')
    const b = store()
    await expect(new PackTrees(b, settings).ensure({ ...pack, image_ref: null }))
      .rejects.toMatchObject({ code: 'registry_unavailable', message: expect.stringMatching(/has no image_ref to pull it from/) })
    const port = await freePort()
    const down = { ...pack, image_ref: pack.image_ref.replace(registry.host, `127.0.0.1:${port}`) }
    const dead = registrySettingsFromEnv({ CORRAL_PACK_REGISTRY: `127.0.0.1:${port}/corral` })
    await expect(new PackTrees(b, dead).ensure(down))
      .rejects.toMatchObject({ code: 'registry_unavailable', message: expect.stringMatching(/pulling .* failed: .*unreachable/) })
    expect(await b.has(pack.image_digest)).toBe(false)
  })
})
