// The upload PATH of `pack upload` / `pack reupload` turned into what the client sends: a pack
// directory is packed here into a deterministic tar.gz; a .tar.gz file is sent as is.
import { readdir, stat } from 'node:fs/promises'
import { join, posix, relative, sep } from 'node:path'
import type { ArchiveSource } from '../client/index.js'

/** PATH of `pack upload`/`reupload` is neither a directory nor a .tar.gz file (the CLI exits 2). */
export class PackPathError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'PackPathError'
  }
}

/**
 * What to upload for PATH: a directory is packed here (pack.yaml at its root); a `.tar.gz`/`.tgz`
 * file is sent as is. `files` counts the packed entries (directories only), for the progress line.
 */
export async function archiveSourceFor(path: string): Promise<ArchiveSource & { files?: number }> {
  const info = await stat(path).catch((e: NodeJS.ErrnoException) => {
    throw new PackPathError(`cannot read ${path}: ${e.code ?? e.message}`)
  })
  if (info.isDirectory()) {
    const entries = await packEntries(path)
    if (!entries.includes('pack.yaml')) throw new PackPathError(`${path} has no pack.yaml at its root (see docs/packs.md)`)
    return { bytes: await packDirectory(path, entries), files: entries.length }
  }
  if (info.isFile() && /\.(tar\.gz|tgz)$/i.test(path)) return { file: path }
  throw new PackPathError(`${path}: expected a pack directory or a .tar.gz archive of one`)
}

/** Entries never packed: version-control metadata is not pack content. */
const SKIPPED = new Set(['.git', '.hg', '.svn'])

/**
 * The files and directories under `dir`, relative, `/`-separated and sorted, so that the same
 * tree always packs to the same archive bytes (with the fixed mtime and portable headers below).
 */
export async function packEntries(dir: string): Promise<string[]> {
  const out: string[] = []
  async function walk(abs: string): Promise<void> {
    const entries = await readdir(abs, { withFileTypes: true })
    for (const e of entries) {
      if (SKIPPED.has(e.name)) continue
      const path = join(abs, e.name)
      out.push(relative(dir, path).split(sep).join(posix.sep))
      if (e.isDirectory()) await walk(path)
    }
  }
  await walk(dir)
  return out.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
}

/** Packs a pack directory (pack.yaml at its root) into a deterministic tar.gz, in memory. */
export async function packDirectory(dir: string, entries?: readonly string[]): Promise<Uint8Array> {
  entries ??= await packEntries(dir)
  // tar is only needed by the upload commands; keep it off every other command's startup path.
  const { create } = await import('tar')
  const chunks: Buffer[] = []
  const stream = create({ cwd: dir, gzip: true, portable: true, noDirRecurse: true, mtime: new Date(0), follow: false }, [...entries])
  for await (const chunk of stream as AsyncIterable<Buffer>) chunks.push(chunk)
  return new Uint8Array(Buffer.concat(chunks))
}
