// Layer flattening (src/packs/registry-layers.ts) fuzzed with fast-check: (1) against an
// independent model of the OCI changeset rules (replacement, whiteouts, opaque directories), on
// random layer stacks over a small path alphabet, gzip and plain layers mixed; (2) hostile layers
// (absolute names, `..`, links out, devices) flattened and ingested never write outside the
// store's scratch directory, and either ingest or fail as a validation error on image_ref.
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gzipSync } from 'node:zlib'
import fc from 'fast-check'
import tarStream from 'tar-stream'
import { afterAll, describe, expect, it } from 'vitest'
import { CorralError } from '../../src/contract/index.js'
import { PackContent } from '../../src/packs/content.js'
import { flattenLayers } from '../../src/packs/registry-layers.js'
import { tarOf, type TestEntry } from './archives.js'

const scratch = mkdtempSync(join(tmpdir(), 'corral-layers-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))
let n = 0
const LIMITS = { maxEntries: 10_000, maxTarBytes: 64 * 1024 * 1024 }

type Op = { kind: 'file'; path: string; body: string } | { kind: 'dir'; path: string } | { kind: 'wh'; path: string } | { kind: 'opq'; path: string }

async function layerFiles(layers: readonly (readonly TestEntry[])[], gzip: readonly boolean[]): Promise<string[]> {
  const dir = join(scratch, `l${n++}`)
  const files: string[] = []
  for (const [i, entries] of layers.entries()) {
    const tar = await tarOf(entries)
    const file = `${dir}-${i}`
    writeFileSync(file, gzip[i % gzip.length] ? gzipSync(tar) : tar)
    files.push(file)
  }
  return files
}

/** The flattened tar as path → 'dir' or file body. */
async function read(tar: AsyncIterable<Buffer>): Promise<Map<string, string>> {
  const extract = tarStream.extract()
  const out = new Map<string, string>()
  const done = (async () => {
    for await (const entry of extract) {
      const chunks: Buffer[] = []
      for await (const c of entry) chunks.push(c as Buffer)
      const name = entry.header.name.replace(/\/$/, '')
      expect(out.has(name)).toBe(false) // each path once
      out.set(name, entry.header.type === 'directory' ? 'dir' : Buffer.concat(chunks).toString())
    }
  })()
  for await (const chunk of tar) extract.write(chunk)
  extract.end(undefined)
  await done
  return out
}

/** The model: entries surviving per the OCI image spec, written without the implementation's trie. */
function model(layers: readonly (readonly Op[])[]): Map<string, string> {
  const state = new Map<string, { v: string; layer: number }>()
  const under = (p: string, q: string) => q === p || q.startsWith(`${p}/`)
  for (const [i, ops] of layers.entries()) {
    for (const op of ops) {
      if (op.kind === 'wh') {
        for (const [k, e] of state) if (under(op.path, k) && e.layer < i) state.delete(k)
      } else if (op.kind === 'opq') {
        for (const [k, e] of state) if (k.startsWith(`${op.path}/`) && e.layer < i) state.delete(k)
      } else if (op.kind === 'file') {
        for (const [k, e] of state) if (k.startsWith(`${op.path}/`) && e.layer < i) state.delete(k)
        state.set(op.path, { v: op.body, layer: i })
      } else {
        state.set(op.path, { v: 'dir', layer: i })
      }
    }
  }
  return new Map([...state].map(([k, e]) => [k, e.v]))
}

function entriesOf(ops: readonly Op[]): TestEntry[] {
  return ops.map((op) => {
    const slash = op.path.lastIndexOf('/')
    const parent = slash < 0 ? '' : `${op.path.slice(0, slash + 1)}`
    const base = op.path.slice(slash + 1)
    switch (op.kind) {
      case 'file': return { name: op.path, body: op.body }
      case 'dir': return { name: `${op.path}/`, type: 'directory' as const }
      case 'wh': return { name: `${parent}.wh.${base}`, body: '' }
      case 'opq': return { name: `${op.path}/.wh..wh..opq`, body: '' }
    }
  })
}

const pathArb = fc.array(fc.constantFrom('a', 'b', 'c'), { minLength: 1, maxLength: 3 }).map((p) => p.join('/'))
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('file' as const), path: pathArb, body: fc.constantFrom('1', '2', '3', '') }),
  fc.record({ kind: fc.constant('dir' as const), path: pathArb }),
  fc.record({ kind: fc.constant('wh' as const), path: pathArb }),
  fc.record({ kind: fc.constant('opq' as const), path: pathArb }),
)
/**
 * One layer as real tools write them: each path at most once, and a file or whiteout is never an
 * ancestor of another entry of the same layer (a layer is one directory diff).
 */
const layerArb = fc.array(opArb, { maxLength: 8 }).map((ops) => {
  const kept: Op[] = []
  const target = (op: Op) => (op.kind === 'wh' ? `${op.path}` : op.path)
  for (const op of ops) {
    const p = target(op)
    const clash = kept.some((k) => {
      const q = target(k)
      if (q === p) return true
      const ancestorLeaf = (a: Op, b: string) => (a.kind === 'file' || a.kind === 'wh') && b.startsWith(`${target(a)}/`)
      return ancestorLeaf(k, p) || ancestorLeaf(op, q)
    })
    if (!clash) kept.push(op)
  }
  return kept
})

describe('flattening layers', () => {
  it('matches the OCI changeset model on random layer stacks', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(layerArb, { minLength: 1, maxLength: 4 }), fc.array(fc.boolean(), { minLength: 1, maxLength: 4 }), async (layers, gzip) => {
        const files = await layerFiles(layers.map(entriesOf), gzip)
        const got = await read(await flattenLayers(files, LIMITS))
        expect(Object.fromEntries(got)).toEqual(Object.fromEntries(model(layers)))
      }),
      { numRuns: 150 },
    )
  })

  it('refuses zstd layers, garbage and too many entries as validation errors on image_ref', async () => {
    const zstd = join(scratch, 'zstd')
    writeFileSync(zstd, Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0]))
    const garbage = join(scratch, 'garbage')
    writeFileSync(garbage, gzipSync(Buffer.from('not a tar at all, just text that is long enough '.repeat(20))))
    const many = (await layerFiles([[{ name: 'a' }, { name: 'b' }, { name: 'c' }]], [false]))[0]!
    for (const [file, why] of [[zstd, /zstd/], [garbage, /not a valid tar\+gzip/], [many, /more than 2 entries/]] as const) {
      const err = await (async () => {
        const out = await flattenLayers([file], { ...LIMITS, maxEntries: 2 })
        for await (const c of out) void c
      })().then(() => undefined, (e: unknown) => e)
      expect(err).toBeInstanceOf(CorralError)
      expect((err as CorralError).code).toBe('validation_error')
      expect(((err as CorralError).details?.fields as Record<string, string>).image_ref).toMatch(why)
    }
  })

  it('never writes outside the store when hostile layers are flattened and ingested', async () => {
    const hostileName = fc.oneof(
      pathArb,
      fc.constantFrom('/etc/x', '../x', 'a/../../x', './a', 'a//b', '.wh.pack.yaml', '.wh...', 'a/.wh..wh..opq', '\\x', 'c:/x'),
    )
    const entryArb: fc.Arbitrary<TestEntry> = fc.oneof(
      fc.record({ name: hostileName, body: fc.constantFrom('x', '') }),
      fc.record({ name: hostileName, type: fc.constant('directory' as const) }),
      fc.record({ name: hostileName, type: fc.constant('symlink' as const), linkname: fc.constantFrom('../../../../tmp', '/etc', 'a', '../x', 'pack.yaml') }),
      fc.record({ name: hostileName, type: fc.constant('link' as const), linkname: fc.constantFrom('pack.yaml', '/etc/passwd', '../x', 'a') }),
      fc.record({ name: hostileName, type: fc.constant('character-device' as const) }),
    )
    const outside = mkdtempSync(join(scratch, 'outside-'))
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(entryArb, { maxLength: 6 }), { minLength: 1, maxLength: 3 }), async (layers) => {
        const store = new PackContent(join(outside, 'store', `s${n++}`), { maxCompressedBytes: 1 << 20, maxUncompressedBytes: 1 << 20, maxEntries: 100 })
        const files = await layerFiles([[{ name: 'pack.yaml', body: 'name: fuzz\nversion: "1"\n' }], ...layers], [false, true])
        try {
          const ingested = await store.ingest(await flattenLayers(files, LIMITS), { plain: true })
          ingested.release()
        } catch (err) {
          expect(err).toBeInstanceOf(CorralError)
          expect((err as CorralError).code).toBe('validation_error')
        }
        // Only the store directory exists beside it; nothing was written outside the store root.
        expect(readdirSync(outside)).toEqual(['store'])
        expect(readdirSync(store.root).filter((f) => !f.startsWith('sha256-'))).toEqual([])
      }),
      { numRuns: 100 },
    )
  })
})
