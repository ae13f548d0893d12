// Reading an uploaded pack archive (tar.gz) safely, streaming, into a fresh directory.
// The archive is hostile input: every entry name is checked before anything is written (absolute
// paths, `..`, NUL), only regular files and directories are written while reading, and links are
// applied after the last entry — so no write can ever pass through a link. Symlinks must resolve
// inside the pack; hardlinks become copies of a file of the same archive; devices and fifos are
// refused. Sizes are bounded three ways (compressed bytes, declared file bytes, decompressed
// stream bytes) so neither a huge upload nor a gzip bomb fills the disk. Limits: docs/packs.md.
import { constants } from 'node:fs'
import { copyFile, lstat, mkdir, open, readdir, realpath, symlink, writeFile } from 'node:fs/promises'
import { dirname, join, posix, sep } from 'node:path'
import { Readable, Transform, type TransformCallback } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { createGunzip } from 'node:zlib'
import tarStream from 'tar-stream'
import { CorralError, apiError } from '../contract/index.js'

/** tar-stream's entry (a streamx Readable): iterated, never piped, so node and streamx streams never meet mid-pipe. */
type TarEntry = ReturnType<typeof tarStream.extract> extends AsyncIterable<infer S> ? S : never

export interface ArchiveLimits {
  /** Largest accepted archive as uploaded (compressed), in bytes. */
  readonly maxCompressedBytes: number
  /** Largest total of file sizes once extracted, in bytes. */
  readonly maxUncompressedBytes: number
  /** Most entries (files, directories and links) in one archive. */
  readonly maxEntries: number
}

export const DEFAULT_ARCHIVE_LIMITS: ArchiveLimits = Object.freeze({
  maxCompressedBytes: 100 * 1024 * 1024,
  maxUncompressedBytes: 1024 * 1024 * 1024,
  maxEntries: 20_000,
})

/** Longest entry path (bytes) and deepest nesting accepted. */
const MAX_PATH_BYTES = 1024
const MAX_DEPTH = 64
/** Files up to this size are buffered and written in one call. */
const SMALL_FILE_BYTES = 256 * 1024

/** Limits from the environment: CORRAL_PACK_MAX_BYTES (compressed upload size). */
export function archiveLimitsFromEnv(env: NodeJS.ProcessEnv = process.env): ArchiveLimits {
  const raw = env.CORRAL_PACK_MAX_BYTES
  if (raw === undefined || raw === '') return DEFAULT_ARCHIVE_LIMITS
  const n = Number(raw)
  if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`CORRAL_PACK_MAX_BYTES must be a positive integer (bytes), got ${raw}`)
  return Object.freeze({ ...DEFAULT_ARCHIVE_LIMITS, maxCompressedBytes: n })
}

export interface ArchiveFormat {
  /** An uncompressed tar (a registry image's flattened layers, src/packs/registry-layers.ts); default tar.gz. */
  plain?: boolean
}

export interface ExtractedArchive {
  /** The pack's root inside the target: the target itself, or its single top-level directory. */
  root: string
  files: number
}

/**
 * Extracts `archive` (a gzip-compressed tar) into `target`, which must not exist yet. Resolves with
 * the directory holding pack.yaml. Refusals are CorralErrors: `payload_too_large` for an upload
 * over maxCompressedBytes, `validation_error` (details.fields.archive) for everything else.
 * On refusal, `target` may hold a partial tree: the caller removes it.
 */
export async function extractPackArchive(archive: Readable | Buffer, target: string, limits: ArchiveLimits = DEFAULT_ARCHIVE_LIMITS, opts: ArchiveFormat = {}): Promise<ExtractedArchive> {
  await mkdir(target, { recursive: false, mode: 0o700 })
  const state = new ExtractState(target, limits)
  const source = Buffer.isBuffer(archive) ? Readable.from([archive]) : archive
  const extract = tarStream.extract()
  const consume = (async () => {
    for await (const entry of extract) await state.entry(entry)
  })()
  try {
    await Promise.all([
      opts.plain
        ? pipeline(source, new ByteLimit(decompressedCeiling(limits), 'decompressed'), extract)
        : pipeline(source, new GzipCheck(), new ByteLimit(limits.maxCompressedBytes, 'compressed'), createGunzip(), new ByteLimit(decompressedCeiling(limits), 'decompressed'), extract),
      consume,
    ])
  } catch (err) {
    // Whichever side failed first, let the other settle before reporting.
    extract.destroy()
    await consume.catch(() => {})
    throw asRefusal(err)
  }
  await state.finishLinks()
  return { root: await state.packRoot(), files: state.files }
}

/** Tar framing adds at most a header (plus a long-name header pair) and padding per entry. */
function decompressedCeiling(l: ArchiveLimits): number {
  return l.maxUncompressedBytes + (l.maxEntries + 2) * 3 * 1024 + 1024 * 1024
}

class ExtractState {
  files = 0
  #entries = 0
  #bytes = 0
  readonly #seen = new Map<string, 'file' | 'directory' | 'link'>()
  /** Declared size of each regular file, so hardlink copies count towards the limit too. */
  readonly #sizes = new Map<string, number>()
  readonly #dirs = new Set<string>()
  readonly #links: { path: string; kind: 'symlink' | 'hardlink'; target: string }[] = []

  constructor(readonly target: string, readonly limits: ArchiveLimits) {}

  async entry(entry: TarEntry): Promise<void> {
    const h = entry.header
    if (++this.#entries > this.limits.maxEntries) {
      entry.resume()
      throw refuse(`has more than ${this.limits.maxEntries} entries`)
    }
    const path = safePath(h.name)
    if (path === '') {
      // The archive's own root (`./`): nothing to create.
      await drain(entry)
      return
    }
    const type = h.type ?? 'unknown'
    switch (type) {
      case 'directory':
        this.#claim(path, 'directory')
        await this.#mkdirs(join(this.target, path))
        await drain(entry)
        return
      case 'file':
      case 'contiguous-file': {
        this.#claim(path, 'file')
        const size = h.size ?? 0
        this.#sizes.set(path, size)
        this.#count(size, entry)
        const file = join(this.target, path)
        await this.#mkdirs(dirname(file))
        // `wx`: never follow or replace anything already there. Small files are written in one
        // call (per-call overhead dominates packs of many small files; bench/packs.ts).
        // Read-only from the start (the content store keeps them so), executable if any x bit was set.
        const mode = (h.mode ?? 0o644) & 0o111 ? 0o555 : 0o444
        if (size <= SMALL_FILE_BYTES) {
          const chunks: Buffer[] = []
          for await (const chunk of entry) chunks.push(chunk as Buffer)
          await writeFile(file, Buffer.concat(chunks), { flag: 'wx', mode })
        } else {
          const out = await open(file, 'wx', mode)
          try {
            for await (const chunk of entry) {
              const buf = chunk as Buffer
              for (let off = 0; off < buf.length;) off += (await out.write(buf, off, buf.length - off)).bytesWritten
            }
          } finally {
            await out.close()
          }
        }
        this.files++
        return
      }
      case 'symlink':
      case 'link': {
        this.#claim(path, 'link')
        const linkname = h.linkname ?? ''
        if (type === 'symlink') {
          // A cheap lexical check first; packRoot() checks the real resolution of every link too.
          const lexical = posix.normalize(posix.join(posix.dirname(path), linkname))
          if (linkname === '' || posix.isAbsolute(linkname) || lexical === '..' || lexical.startsWith('../')) {
            throw refuse(`symlink ${shown(path)} points outside the pack (${JSON.stringify(linkname)})`)
          }
          this.#links.push({ path, kind: 'symlink', target: linkname })
        } else {
          this.#links.push({ path, kind: 'hardlink', target: safeLinkTarget(path, linkname) })
        }
        await drain(entry)
        return
      }
      default:
        entry.resume()
        throw refuse(`entry ${shown(path)} has type ${type}; only files, directories and links are allowed`)
    }
  }

  /** mkdir -p, once per directory: the tree is fresh and only this reader writes to it. */
  async #mkdirs(dir: string): Promise<void> {
    if (this.#dirs.has(dir)) return
    await mkdir(dir, { recursive: true, mode: 0o755 })
    this.#dirs.add(dir)
  }

  #count(size: number, entry?: TarEntry): void {
    this.#bytes += size
    if (this.#bytes > this.limits.maxUncompressedBytes) {
      entry?.resume()
      throw refuse(`unpacks to more than ${this.limits.maxUncompressedBytes} bytes`)
    }
  }

  #claim(path: string, kind: 'file' | 'directory' | 'link'): void {
    const previous = this.#seen.get(path)
    // Directories may be listed twice (tar tools do); anything else twice is ambiguous.
    if (previous && !(previous === 'directory' && kind === 'directory')) throw refuse(`entry ${shown(path)} appears more than once`)
    this.#seen.set(path, kind)
    const parts = path.split('/')
    for (let i = 1; i < parts.length; i++) {
      const parent = parts.slice(0, i).join('/')
      const p = this.#seen.get(parent)
      if (p && p !== 'directory') throw refuse(`entry ${shown(path)} is inside ${shown(parent)}, which is not a directory`)
      if (!p) this.#seen.set(parent, 'directory')
    }
  }

  /** Hardlinks become copies, symlinks are created; both only after every file is written. */
  async finishLinks(): Promise<void> {
    for (const link of this.#links) {
      const at = join(this.target, link.path)
      await mkdir(dirname(at), { recursive: true, mode: 0o755 })
      if (link.kind === 'hardlink') {
        if (this.#seen.get(link.target) !== 'file') throw refuse(`hardlink ${shown(link.path)} does not point to a file of the archive (${shown(link.target)})`)
        this.#count(this.#sizes.get(link.target) ?? 0)
        await copyFile(join(this.target, link.target), at, constants.COPYFILE_EXCL)
        this.files++
      } else {
        await symlink(link.target, at)
      }
    }
  }

  /** The directory holding pack.yaml: the target, or its only top-level directory. */
  async packRoot(): Promise<string> {
    const top = await readdir(this.target)
    let root: string | undefined
    if (top.includes('pack.yaml')) root = this.target
    else if (top.length === 1) {
      const only = join(this.target, top[0]!)
      if ((await lstat(only)).isDirectory() && (await readdir(only)).includes('pack.yaml')) root = only
    }
    if (root === undefined) throw refuse('has no pack.yaml at its root (or inside one top-level directory)')
    await this.#checkSymlinks(root)
    return root
  }

  /**
   * Every symlink resolves, through any chain of links, to something inside the pack root (the
   * stripped one: `mypack/l -> ../x` must not escape `mypack`). Checked on the real tree because
   * a lexical check misses chains such as `sub/c -> ..` followed by `e -> sub/c/../..`.
   */
  async #checkSymlinks(root: string): Promise<void> {
    if (this.#links.every((l) => l.kind !== 'symlink')) return
    const realRoot = await realpath(root)
    for (const link of this.#links) {
      if (link.kind !== 'symlink') continue
      const at = join(this.target, link.path)
      if (!at.startsWith(root + sep)) throw refuse(`symlink ${shown(link.path)} is outside the pack root`)
      let resolved: string
      try {
        resolved = await realpath(at)
      } catch (err) {
        const code = (err as { code?: string }).code
        throw refuse(`symlink ${shown(link.path)} ${code === 'ELOOP' ? 'is part of a loop' : `points to nothing in the pack (${JSON.stringify(link.target)})`}`)
      }
      if (resolved !== realRoot && !resolved.startsWith(realRoot + sep)) throw refuse(`symlink ${shown(link.path)} points outside the pack (${JSON.stringify(link.target)})`)
    }
  }
}

/** The entry's normalised relative path; refuses absolute paths, `..`, NUL, over-long or too deep names, naming the entry. */
function safePath(name: string): string {
  const { path, problem } = checkPath(name)
  if (problem) throw refuse(`entry ${shown(name)} ${problem}`)
  return path
}

/**
 * A hardlink's target, checked like an entry name; a refusal names the link entry first (the
 * entry an archive's author must fix), then the target it points to.
 */
function safeLinkTarget(entry: string, linkname: string): string {
  const { path, problem } = checkPath(linkname)
  if (problem) throw refuse(`hardlink ${shown(entry)} points outside the pack: its target ${shown(linkname)} ${problem}`)
  return path
}

/** A pack-relative path checked as an archive entry's name is: the normalised path, or why it is refused. */
export function checkPath(name: string): { path: string; problem?: string } {
  if (name.includes('\0')) return { path: '', problem: 'contains a NUL byte' }
  if (name.startsWith('/') || /^[A-Za-z]:[\\/]/.test(name)) return { path: '', problem: 'has an absolute path' }
  if (name.includes('\\')) return { path: '', problem: 'contains a backslash' }
  const parts = name.split('/').filter((p) => p !== '' && p !== '.')
  if (parts.includes('..')) return { path: '', problem: 'climbs out of the pack (..)' }
  const path = parts.join('/')
  if (Buffer.byteLength(path) > MAX_PATH_BYTES) return { path: '', problem: `is longer than ${MAX_PATH_BYTES} bytes` }
  if (parts.length > MAX_DEPTH) return { path: '', problem: `is nested deeper than ${MAX_DEPTH} levels` }
  return { path }
}

/** An entry name as it appears in a refusal: JSON-quoted (control bytes escaped), long names cut. */
function shown(name: string): string {
  return name.length > 120 ? `${JSON.stringify(name.slice(0, 120))}…` : JSON.stringify(name)
}

async function drain(entry: TarEntry): Promise<void> {
  for await (const chunk of entry) void chunk
}

function refuse(why: string): CorralError {
  return apiError('validation_error', `the pack archive ${why}`, { fields: { archive: why } })
}

/** Library and I/O errors on hostile input become one validation error; our own refusals pass. */
function asRefusal(err: unknown): CorralError {
  if (err instanceof CorralError) return err
  const e = err as { code?: string; message?: string }
  if (e.code === 'ENOTDIR' || e.code === 'EEXIST' || e.code === 'EISDIR') return refuse(`has conflicting entries (${e.code})`)
  if (e.code === 'ENOSPC' || e.code === 'EACCES' || e.code === 'EMFILE') throw err
  return refuse(`is not a valid tar.gz: ${(e.message ?? String(err)).split('\n')[0]}`)
}

/** Fails a stream once more than `max` bytes passed. */
class ByteLimit extends Transform {
  #seen = 0
  constructor(readonly max: number, readonly what: 'compressed' | 'decompressed') {
    super()
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.#seen += chunk.length
    if (this.#seen > this.max) {
      done(this.what === 'compressed'
        ? apiError('payload_too_large', `the pack archive is larger than ${this.max} bytes (CORRAL_PACK_MAX_BYTES)`, { limit_bytes: this.max })
        : refuse(`unpacks to more than the allowed size (${this.max} bytes of tar stream)`))
      return
    }
    done(null, chunk)
  }
}

/** The first two bytes must be gzip's magic; a plain tar or a zip gets a clear message. */
class GzipCheck extends Transform {
  #head: Buffer | null = Buffer.alloc(0)
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    if (this.#head === null) return done(null, chunk)
    this.#head = Buffer.concat([this.#head, chunk])
    if (this.#head.length < 2) return done()
    const ok = this.#head[0] === 0x1f && this.#head[1] === 0x8b
    const all = this.#head
    this.#head = null
    if (!ok) return done(refuse('is not gzip-compressed (expected a .tar.gz)'))
    done(null, all)
  }
  override _flush(done: TransformCallback): void {
    if (this.#head !== null) return done(refuse(this.#head.length === 0 ? 'is empty' : 'is not gzip-compressed (expected a .tar.gz)'))
    done()
  }
}

