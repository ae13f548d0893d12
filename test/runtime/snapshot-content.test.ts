// One path of a snapshot without unpacking it (src/runtime/snapshot-content.ts), through both
// SnapshotStores: the local tars and the registry's archive layer (real docker-registry; skipped
// in one line without it). A file's exact bytes, a directory as a tar of its own records (parsed
// back with the tar package), all of /data, and the refusals: missing paths, traversal, absolute
// paths, symbolic and hard links, FIFOs; the registry's scratch copy is gone after each read.
import { randomUUID } from 'node:crypto'
import { linkSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs'
import { mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buffer, text } from 'node:stream/consumers'
import { Parser } from 'tar'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { registrySettingsFromEnv } from '../../src/packs/index.js'
import { LocalSnapshotStore, RegistrySnapshotStore, type SnapshotContent, type SnapshotStore } from '../../src/runtime/index.js'
import { registryAvailable, startRegistry, type TestRegistry } from '../helpers/registry.js'
import { processRuntime, type ProcessRuntimeUnderTest } from './drivers.js'

async function tarPaths(c: SnapshotContent): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  const parser = new Parser({ onReadEntry: (e) => {
    let body = ''
    e.on('data', (d: Buffer) => { body += d.toString() })
    e.on('end', () => { out[e.path.replace(/^\.\//, '').replace(/\/$/, '')] = e.type === 'Directory' ? '<dir>' : body })
  } })
  for await (const chunk of c.stream) parser.write(chunk as Buffer)
  await new Promise<void>((r) => parser.end(r))
  return out
}

function suite(name: string, make: (root: string) => Promise<{ store: SnapshotStore; scratch?: string }>, skip = false) {
  describe.skipIf(skip)(`snapshot content: ${name}`, () => {
    let root: string
    let runtime: ProcessRuntimeUnderTest
    let store: SnapshotStore
    let scratch: string | undefined
    const ws = `ws_content_${randomUUID().slice(0, 8)}`
    beforeAll(async () => {
      root = await mkdtemp(join(tmpdir(), 'corral-content-'))
      ;({ store, scratch } = await make(root))
      runtime = processRuntime({ root: join(root, 'rt'), proxy: { host: '127.0.0.1', port: 1 }, warn: () => {}, snapshots: store })
      const h = await runtime.provision({ workspaceId: ws })
      writeFileSync(join(h.dataDir, 'first.txt'), 'one\n')
      await runtime.snapshot(ws, 1, 'task')
      mkdirSync(join(h.dataDir, 'out/deep'), { recursive: true })
      writeFileSync(join(h.dataDir, 'out/report.md'), '# Report\n')
      writeFileSync(join(h.dataDir, 'out/deep/x.bin'), Buffer.alloc(70_000, 7))
      writeFileSync(join(h.dataDir, 'outside.txt'), 'not under out\n')
      writeFileSync(join(h.dataDir, 'empty'), '')
      symlinkSync('/etc/passwd', join(h.dataDir, 'passwd'))
      linkSync(join(h.dataDir, 'first.txt'), join(h.dataDir, 'hard.txt'))
      await runtime.snapshot(ws, 2, 'task')
    })
    afterAll(async () => {
      await runtime?.close()
      await rm(root, { recursive: true, force: true })
    })
    const read = async (path: string, ref?: string) => runtime.readSnapshot(ws, path, ref)

    it('a file: its exact bytes and entry; an empty file; an older snapshot by ref', async () => {
      const c = await read('out/report.md')
      expect(c).toMatchObject({ kind: 'file', size: 9, entry: { path: 'out/report.md', size: 9, is_dir: false, mime_type: 'text/markdown' } })
      expect(await text(c.stream)).toBe('# Report\n')
      const big = await read('out/deep/x.bin')
      const bytes = await buffer(big.stream)
      expect(bytes.equals(Buffer.alloc(70_000, 7))).toBe(true)
      expect(await text((await read('empty')).stream)).toBe('')
      const [first] = await store.list(ws)
      await expect(read('out/report.md', first!.ref)).rejects.toMatchObject({ code: 'not_found' })
      expect(await text((await read('./first.txt', first!.ref)).stream)).toBe('one\n')
    })

    it('a directory: a tar of its subtree only, readable by a tar parser; no path: all of /data', async () => {
      const dir = await read('out/')
      expect(dir).toMatchObject({ kind: 'tar', entry: { path: 'out', is_dir: true } })
      const files = await tarPaths(dir)
      expect(Object.keys(files).sort()).toEqual(['out', 'out/deep', 'out/deep/x.bin', 'out/report.md'])
      expect(files['out/report.md']).toBe('# Report\n')
      const all = await tarPaths(await read(''))
      expect(Object.keys(all)).toEqual(expect.arrayContaining(['first.txt', 'outside.txt', 'out/deep/x.bin', 'passwd']))
    })

    it('refusals: missing, traversal, absolute, links; the scratch copy never stays', async () => {
      await expect(read('nope.txt')).rejects.toMatchObject({ code: 'not_found', status: 404 })
      for (const p of ['../etc/passwd', '/etc/passwd', 'out/../first.txt', 'out//report.md', 'a\0b']) {
        await expect(read(p), p).rejects.toMatchObject({ code: 'validation_error', status: 400, details: { fields: { path: expect.any(String) } } })
      }
      await expect(read('passwd')).rejects.toMatchObject({ code: 'validation_error', message: expect.stringContaining('symbolic link to /etc/passwd') })
      await expect(read('hard.txt')).rejects.toMatchObject({ code: 'validation_error', message: expect.stringContaining('hard link') })
      await expect(runtime.readSnapshot('ws_none', 'x')).rejects.toMatchObject({ code: 'not_found' })
      // The scratch copies of the reads above (streamed to the end) are removed as they end.
      const left = async () => scratch ? (await readdir(scratch)).filter((n) => n.startsWith('corral-snapshot-')) : []
      for (let i = 0; i < 100 && (await left()).length > 0; i++) await new Promise((r) => setTimeout(r, 20))
      expect(await left()).toEqual([])
    })
  })
}

suite('local tars', async (root) => ({ store: new LocalSnapshotStore((id) => join(root, 'snaps', id)) }))

const available = registryAvailable()
if (!available) console.warn('snapshot content: docker-registry is not installed; skipping the registry store runs')
let registry: TestRegistry | undefined
afterAll(async () => registry?.stop())
suite('registry', async (root) => {
  registry ??= await startRegistry()
  const scratch = join(root, 'scratch')
  const store = new RegistrySnapshotStore({
    client: registrySettingsFromEnv({ CORRAL_PACK_REGISTRY: `${registry.host}/corral` }).client, registry: registry.host, namespace: 'corral', scratchDir: scratch, ownScratch: true,
  })
  return { store, scratch }
}, !available)
