// Packing for `pack upload` / `pack reupload` (src/cli/pack-archive.ts): the deterministic tar.gz a
// pack directory becomes, and what PATH is accepted.
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { list } from 'tar'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { archiveSourceFor, packDirectory, packEntries, PackPathError } from '../../src/cli/pack-archive.js'

let dir: string
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'corral-packs-client-'))
})
afterEach(() => rmSync(dir, { recursive: true, force: true }))

function writeTree(root: string, files: Record<string, string>): void {
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(root, path, '..'), { recursive: true })
    writeFileSync(join(root, path), text)
  }
}

async function archiveEntries(bytes: Uint8Array): Promise<{ path: string; mtime?: number; uid?: number }[]> {
  const out: { path: string; mtime?: number; uid?: number }[] = []
  const file = join(dir, `listed-${Math.random().toString(36).slice(2)}.tar.gz`)
  writeFileSync(file, bytes)
  await list({ file, onReadEntry: (e) => void out.push({ path: e.path, mtime: e.mtime?.getTime(), uid: e.uid }) })
  return out
}

describe('packDirectory', () => {
  it('packs the same tree to the same bytes whatever the mtimes and creation order, sorted, .git left out', async () => {
    const a = join(dir, 'a')
    const b = join(dir, 'b')
    writeTree(a, { 'pack.yaml': 'name: x\nversion: "1"\n', 'z.txt': 'z', 'docs/b.md': 'b', 'docs/a.md': 'a', '.git/HEAD': 'ref' })
    writeTree(b, { 'docs/a.md': 'a', '.git/HEAD': 'other', 'z.txt': 'z', 'docs/b.md': 'b', 'pack.yaml': 'name: x\nversion: "1"\n' })
    utimesSync(join(b, 'z.txt'), new Date('2001-01-01'), new Date('2001-01-01'))

    expect(await packEntries(a)).toEqual(['docs', 'docs/a.md', 'docs/b.md', 'pack.yaml', 'z.txt'])
    const bytesA = await packDirectory(a)
    const bytesB = await packDirectory(b)
    expect(Buffer.from(bytesA).equals(Buffer.from(bytesB))).toBe(true)

    const entries = await archiveEntries(bytesA)
    expect(entries.map((e) => e.path)).toEqual(['docs/', 'docs/a.md', 'docs/b.md', 'pack.yaml', 'z.txt'])
    // No entry carries the machine's clock or owner (0 or absent).
    expect(entries.filter((e) => (e.mtime ?? 0) !== 0 || (e.uid ?? 0) !== 0)).toEqual([])
  })

  it('changes the bytes when a file changes', async () => {
    writeTree(dir, { 'pack.yaml': 'name: x\nversion: "1"\n' })
    const before = Buffer.from(await packDirectory(dir))
    writeFileSync(join(dir, 'pack.yaml'), 'name: x\nversion: "2"\n')
    expect(before.equals(Buffer.from(await packDirectory(dir)))).toBe(false)
  })
})

describe('archiveSourceFor', () => {
  it('packs a directory with pack.yaml, passes a .tar.gz file through, refuses anything else', async () => {
    writeTree(join(dir, 'ok'), { 'pack.yaml': 'name: x\nversion: "1"\n', 'a.txt': 'a' })
    const packed = await archiveSourceFor(join(dir, 'ok'))
    expect(packed).toMatchObject({ files: 2 })
    expect('bytes' in packed && packed.bytes.byteLength).toBeGreaterThan(0)

    writeFileSync(join(dir, 'built.tar.gz'), 'whatever: the server judges the contents')
    expect(await archiveSourceFor(join(dir, 'built.tar.gz'))).toEqual({ file: join(dir, 'built.tar.gz') })

    writeTree(join(dir, 'nomanifest'), { 'README.md': 'hi' })
    await expect(archiveSourceFor(join(dir, 'nomanifest'))).rejects.toThrow(/has no pack\.yaml at its root/)
    await expect(archiveSourceFor(join(dir, 'ok/a.txt'))).rejects.toThrow(/expected a pack directory or a \.tar\.gz/)
    const missing = await archiveSourceFor(join(dir, 'nope')).catch((e: unknown) => e)
    expect(missing).toBeInstanceOf(PackPathError)
    expect((missing as Error).message).toContain('ENOENT')
  })
})
