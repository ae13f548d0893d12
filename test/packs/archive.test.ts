// The archive reader on real files: what it accepts (prefix stripping, links inside, hardlink
// copies) and every refusal (absolute, .., links out, devices, limits, not gzip, no pack.yaml);
// then a fast-check fuzz: random and bit-flipped archives end in a result or a CorralError, and
// nothing is ever written outside the target.
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { gzipSync } from 'node:zlib'
import fc from 'fast-check'
import { afterAll, describe, expect, it } from 'vitest'
import { CorralError } from '../../src/contract/index.js'
import { DEFAULT_ARCHIVE_LIMITS, archiveLimitsFromEnv, extractPackArchive, type ArchiveLimits } from '../../src/packs/archive.js'
import { MANIFEST, demoPack, tarOf, tgzOf, type TestEntry } from './archives.js'

const base = mkdtempSync(join(tmpdir(), 'corral-archive-'))
afterAll(() => rmSync(base, { recursive: true, force: true }))
let n = 0
const freshTarget = () => join(mkdtempSync(join(base, `t${++n}-`)), 'x')

async function refusal(archive: Buffer | Readable, limits?: ArchiveLimits): Promise<CorralError> {
  try {
    await extractPackArchive(archive, freshTarget(), limits)
  } catch (err) {
    expect(err).toBeInstanceOf(CorralError)
    return err as CorralError
  }
  throw new Error('expected a refusal')
}

const withManifest = (entries: TestEntry[]) => tgzOf([{ name: 'pack.yaml', body: MANIFEST }, ...entries])

describe('extractPackArchive', () => {
  it('extracts a pack at the root, from a buffer or a stream', async () => {
    const target = freshTarget()
    const out = await extractPackArchive(Readable.from([await demoPack()]), target)
    expect(out.root).toBe(target)
    expect(out.files).toBe(4)
    expect(readdirSync(target).sort()).toEqual(['bin', 'caps.yaml', 'docs', 'pack.yaml'])
    expect(readFileSync(join(target, 'docs/readme.md'), 'utf8')).toBe('# demo\n')
  })

  it('strips one top-level directory holding pack.yaml', async () => {
    const target = freshTarget()
    const out = await extractPackArchive(await demoPack({ prefix: 'mypack' }), target)
    expect(out.root).toBe(join(target, 'mypack'))
    const dotted = await extractPackArchive(await tgzOf([{ name: './', type: 'directory' }, { name: './pack.yaml', body: MANIFEST }]), freshTarget())
    expect(readdirSync(dotted.root)).toEqual(['pack.yaml'])
  })

  it('keeps symlinks that stay inside and turns hardlinks into copies', async () => {
    const target = freshTarget()
    await extractPackArchive(await withManifest([
      { name: 'lib/a.txt', body: 'A' },
      { name: 'lib/current', type: 'symlink', linkname: 'a.txt' },
      { name: 'top', type: 'symlink', linkname: 'lib/../pack.yaml' },
      { name: 'copy.txt', type: 'link', linkname: 'lib/a.txt' },
    ]), target)
    expect(readlinkSync(join(target, 'lib/current'))).toBe('a.txt')
    expect(readFileSync(join(target, 'top'), 'utf8')).toBe(MANIFEST)
    expect(readFileSync(join(target, 'copy.txt'), 'utf8')).toBe('A')
  })

  it.each<[string, TestEntry[], RegExp]>([
    ['absolute paths', [{ name: '/etc/passwd', body: 'x' }], /absolute path/],
    ['.. in a path', [{ name: 'a/../../evil', body: 'x' }], /climbs out/],
    ['symlinks pointing outside', [{ name: 'l', type: 'symlink', linkname: '../../etc/passwd' }], /points outside/],
    ['absolute symlinks', [{ name: 'l', type: 'symlink', linkname: '/etc/passwd' }], /points outside/],
    ['symlink chains escaping', [{ name: 'sub/c', type: 'symlink', linkname: '..' }, { name: 'e', type: 'symlink', linkname: 'sub/c/../..' }], /points outside/],
    ['dangling symlinks', [{ name: 'l', type: 'symlink', linkname: 'nothing' }], /points to nothing/],
    ['symlink loops', [{ name: 'a', type: 'symlink', linkname: 'b' }, { name: 'b', type: 'symlink', linkname: 'a' }], /loop/],
    ['hardlinks to outside', [{ name: 'h', type: 'link', linkname: '../outside' }], /climbs out/],
    ['hardlinks to nothing', [{ name: 'h', type: 'link', linkname: 'missing' }], /does not point to a file/],
    ['fifos', [{ name: 'f', type: 'fifo' }], /fifo/],
    ['character devices', [{ name: 'null', type: 'character-device' }], /character-device/],
    ['block devices', [{ name: 'sda', type: 'block-device' }], /block-device/],
    ['duplicate files', [{ name: 'a', body: '1' }, { name: 'a', body: '2' }], /more than once/],
    ['a file used as a directory', [{ name: 'a', body: '1' }, { name: 'a/b', body: '2' }], /not a directory/],
    ['writing through a symlinked directory', [{ name: 'd', type: 'symlink', linkname: '.' }, { name: 'd/x', body: '2' }], /not a directory/],
  ])('refuses %s', async (_title, entries, message) => {
    const err = await refusal(await withManifest(entries))
    expect(err.code).toBe('validation_error')
    expect(err.message).toMatch(message)
    expect(err.details?.fields).toHaveProperty('archive')
  })

  it('refuses entry types it does not know (e.g. GNU sparse files)', async () => {
    const tar = await tarOf([{ name: 'pack.yaml', body: MANIFEST }, { name: 'sparse', body: 'x' }])
    // Second header at 1024 (512 header + 512 padded body): typeflag 'S', checksum recomputed.
    const h = tar.subarray(1024, 1536)
    h[156] = 'S'.charCodeAt(0)
    h.fill(0x20, 148, 156)
    const sum = h.reduce((a, b) => a + b, 0)
    h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1')
    const err = await refusal(gzipSync(tar))
    expect(err.message).toMatch(/entry "sparse" has type unknown/)
  })

  it('refuses archives without pack.yaml, or with it two levels down', async () => {
    expect((await refusal(await tgzOf([{ name: 'readme', body: 'x' }]))).message).toMatch(/no pack.yaml/)
    expect((await refusal(await tgzOf([{ name: 'a/b/pack.yaml', body: MANIFEST }]))).message).toMatch(/no pack.yaml/)
    expect((await refusal(await tgzOf([{ name: 'a/pack.yaml', body: MANIFEST }, { name: 'b/x', body: '' }]))).message).toMatch(/no pack.yaml/)
  })

  it('refuses what is not a tar.gz', async () => {
    expect((await refusal(Buffer.alloc(0))).message).toMatch(/empty/)
    expect((await refusal(await tarOf([{ name: 'pack.yaml', body: MANIFEST }]))).message).toMatch(/not gzip-compressed/)
    expect((await refusal(Buffer.from('PK\u0003\u0004zip'))).message).toMatch(/not gzip-compressed/)
    const truncated = (await demoPack()).subarray(0, 60)
    expect((await refusal(truncated)).message).toMatch(/not a valid tar.gz/)
  })

  it('enforces the entry, size and upload limits', async () => {
    const entries = Array.from({ length: 12 }, (_, i) => ({ name: `f${i}`, body: 'x' }))
    expect((await refusal(await withManifest(entries), { ...DEFAULT_ARCHIVE_LIMITS, maxEntries: 10 })).message).toMatch(/more than 10 entries/)
    const big = await withManifest([{ name: 'big', body: Buffer.alloc(64 * 1024) }])
    expect((await refusal(big, { ...DEFAULT_ARCHIVE_LIMITS, maxUncompressedBytes: 32 * 1024 })).message).toMatch(/more than 32768 bytes/)
    // Hardlink copies count: one small file copied many times is still over the limit.
    const copies = await withManifest([{ name: 'f', body: Buffer.alloc(4096) }, ...Array.from({ length: 10 }, (_, i) => ({ name: `c${i}`, type: 'link' as const, linkname: 'f' }))])
    expect((await refusal(copies, { ...DEFAULT_ARCHIVE_LIMITS, maxUncompressedBytes: 16 * 1024 })).message).toMatch(/more than 16384 bytes/)
    // A gzip bomb: a tiny upload that inflates far beyond the limit is cut while streaming.
    const bomb = gzipSync(Buffer.concat([await tarOf([{ name: 'pack.yaml', body: MANIFEST }]), Buffer.alloc(8 * 1024 * 1024)]))
    expect(bomb.length).toBeLessThan(64 * 1024)
    expect((await refusal(bomb, { maxCompressedBytes: 1024 * 1024, maxUncompressedBytes: 1024, maxEntries: 10 })).message).toMatch(/unpacks to more than/)
    const tooBig = await refusal(await withManifest([{ name: 'r', body: randomBytes(8192) }]), { ...DEFAULT_ARCHIVE_LIMITS, maxCompressedBytes: 1024 })
    expect(tooBig.code).toBe('payload_too_large')
  })

  it('reads CORRAL_PACK_MAX_BYTES', () => {
    expect(archiveLimitsFromEnv({})).toEqual(DEFAULT_ARCHIVE_LIMITS)
    expect(archiveLimitsFromEnv({ CORRAL_PACK_MAX_BYTES: '2048' }).maxCompressedBytes).toBe(2048)
    expect(() => archiveLimitsFromEnv({ CORRAL_PACK_MAX_BYTES: '-1' })).toThrow(/positive integer/)
  })

  it('never crashes and never writes outside the target on random or corrupted archives (fuzz)', async () => {
    const valid = await demoPack({ extra: [{ name: 'lib/l', type: 'symlink', linkname: '../docs/readme.md' }, { name: 'h', type: 'link', linkname: 'caps.yaml' }] })
    const limits: ArchiveLimits = { maxCompressedBytes: 1024 * 1024, maxUncompressedBytes: 1024 * 1024, maxEntries: 200 }
    const entryArb = fc.record({
      name: fc.oneof(fc.constantFrom('pack.yaml', 'a', 'a/b', '../x', '/abs', 'd/', './c', 'a/../../y', 'l'), fc.string({ maxLength: 12 })),
      type: fc.constantFrom('file', 'directory', 'symlink', 'link', 'fifo'),
      body: fc.string({ maxLength: 20 }),
      linkname: fc.constantFrom('a', '..', '../..', '/etc', 'a/b', 'pack.yaml', 'l', '.'),
    })
    const archiveArb = fc.oneof(
      // bit flips and truncations of a valid archive
      fc.tuple(fc.array(fc.nat({ max: valid.length * 8 - 1 }), { minLength: 1, maxLength: 8 }), fc.nat({ max: valid.length })).map(([flips, cut]) => {
        const b = Buffer.from(valid)
        for (const bit of flips) b[bit >> 3]! ^= 1 << (bit & 7)
        return cut > 20 ? b.subarray(0, cut) : b
      }),
      // random bytes behind a gzip magic
      fc.uint8Array({ maxLength: 512 }).map((u) => Buffer.concat([Buffer.from([0x1f, 0x8b]), Buffer.from(u)])),
      // random entry lists, hostile names and links included
      fc.array(entryArb, { maxLength: 8 }).map((entries) => ({ entries })),
    )
    await fc.assert(
      fc.asyncProperty(archiveArb, async (arb) => {
        const dir = mkdtempSync(join(base, 'fuzz-'))
        try {
          let archive: Buffer
          if (Buffer.isBuffer(arb)) archive = arb
          else {
            try {
              archive = await tgzOf(arb.entries.map((e) => (e.type === 'file' ? { name: e.name, body: e.body } : e.type === 'symlink' || e.type === 'link' ? { name: e.name, type: e.type, linkname: e.linkname } : { name: e.name, type: e.type })))
            } catch {
              return // tar-stream refused to write the header (e.g. an empty name): nothing to read
            }
          }
          try {
            const out = await extractPackArchive(archive, join(dir, 'target'), limits)
            expect(out.root.startsWith(join(dir, 'target'))).toBe(true)
          } catch (err) {
            if (!(err instanceof CorralError)) throw err
            expect(['validation_error', 'payload_too_large']).toContain(err.code)
          }
          // Nothing next to the target: every write stayed inside it.
          expect(readdirSync(dir).filter((f) => f !== 'target')).toEqual([])
          expect(readdirSync(base).every((f) => /^(t\d+-|fuzz-)/.test(f))).toBe(true)
        } finally {
          rmSync(dir, { recursive: true, force: true })
        }
      }),
      { numRuns: 300 },
    )
  })
})
