// The pack content store. The spec's "the service builds the container image" becomes, for the
// local runtime (no container engine), a normalised content-addressed tree: an uploaded archive is
// extracted into a temporary directory under the store root, its pack.yaml and capabilities
// fragment are checked, permissions are normalised (files read-only, dirs 0755), and the tree is
// hashed as a deterministic tar (sorted entries, zero owners and mtimes) — so the same contents
// always give the same `image_digest`. The tree is then renamed into `<root>/sha256-<hex>`
// atomically; identical content already there is simply reused. Layout and rules: docs/packs.md.
import { createHash } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { chmod, cp, lstat, mkdir, mkdtemp, readdir, readFile, readlink, rename, rm, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import tarStream from 'tar-stream'
import { compilePolicy } from '../policy/index.js'
import { apiError, type PackManifest } from '../contract/index.js'
import { checkPath, DEFAULT_ARCHIVE_LIMITS, extractPackArchive, type ArchiveFormat, type ArchiveLimits } from './archive.js'
import { MAX_MANIFEST_BYTES, parsePackManifest } from './manifest.js'

export const DIGEST_RE = /^sha256:([0-9a-f]{64})$/
/** Largest capabilities fragment read from a pack (same bound as a role's capabilities). */
const MAX_CAPABILITIES_BYTES = 256 * 1024
const EPOCH = new Date(0)
const SMALL_FILE_BYTES = 256 * 1024

/** Releases a pin (idempotent). */
export type Unpin = () => void

export interface IngestedPack {
  manifest: PackManifest
  /** `sha256:<hex>` of the normalised tree's deterministic tar. */
  digest: string
  /** Total bytes of the pack's files. */
  sizeBytes: number
  /** The text of the caps.yaml fragment named by the manifest (it compiled). */
  capabilities?: string
  /**
   * The tree is pinned from the moment it is in place until this is called: removeIfUnused()
   * leaves it alone meanwhile, so a concurrent delete cannot remove content whose pack row is
   * about to be written. Call it once the row is written (or the upload failed).
   */
  release: Unpin
}

export class PackContent {
  readonly #limits: ArchiveLimits
  readonly #pins = new Map<string, number>()
  /** Serialises placing trees and removing them, so neither sees the other half-done. */
  #gc: Promise<unknown> = Promise.resolve()

  /** `root` is `join(dataDir, 'packs')`; it is created on first ingest. */
  constructor(readonly root: string, limits: ArchiveLimits = DEFAULT_ARCHIVE_LIMITS) {
    this.#limits = limits
  }

  get limits(): ArchiveLimits {
    return this.#limits
  }

  /** The extracted read-only tree of a digest (whether or not it exists yet). */
  dir(digest: string): string {
    const m = DIGEST_RE.exec(digest)
    if (!m) throw new Error(`not a pack digest: ${JSON.stringify(digest)}`)
    return join(this.root, `sha256-${m[1]}`)
  }

  async has(digest: string): Promise<boolean> {
    try {
      return (await stat(this.dir(digest))).isDirectory()
    } catch {
      return false
    }
  }

  /**
   * Extracts, validates and stores an uploaded archive. Throws CorralErrors: `validation_error`
   * (archive or pack.yaml), `payload_too_large`, `invalid_capabilities` (the fragment does not
   * compile; details.diagnostics as for roles).
   */
  async ingest(archive: Readable | Buffer, format: ArchiveFormat = {}): Promise<IngestedPack> {
    await mkdir(this.root, { recursive: true, mode: 0o755 })
    const tmp = await mkdtemp(join(this.root, '.ingest-'))
    try {
      const { root } = await extractPackArchive(archive, join(tmp, 'tree'), this.#limits, format)
      return await this.#store(root)
    } finally {
      await rm(tmp, { recursive: true, force: true })
    }
  }

  /**
   * A stored tree with one file's content replaced (or the file added): the edited copy is
   * checked, normalised and stored exactly as an upload of it would be. `path` is checked as an
   * archive entry's name; it may not pass through or land on a symbolic link or a directory.
   * Throws `validation_error` (field `path` or the pack.yaml problem), `payload_too_large`.
   */
  async ingestEdit(digest: string, path: string, data: Buffer): Promise<IngestedPack> {
    const checked = checkPath(path)
    if (checked.problem || checked.path === '') throw pathError( `${JSON.stringify(path)} ${checked.problem ?? 'names no file'}`)
    if (data.length > this.#limits.maxUncompressedBytes) throw apiError('payload_too_large', `the file is larger than ${this.#limits.maxUncompressedBytes} bytes`)
    await mkdir(this.root, { recursive: true, mode: 0o755 })
    const tmp = await mkdtemp(join(this.root, '.ingest-'))
    const unpin = this.pin(digest)
    try {
      const root = join(tmp, 'tree')
      await cp(this.dir(digest), root, { recursive: true, verbatimSymlinks: true })
      await chmod(root, 0o755)
      const parts = checked.path.split('/')
      for (let i = 1; i <= parts.length; i++) {
        const at = join(root, ...parts.slice(0, i))
        const info = await lstat(at).catch(() => undefined)
        if (!info) break
        const last = i === parts.length
        if (info.isSymbolicLink() || (last ? !info.isFile() : !info.isDirectory())) {
          throw pathError( `${JSON.stringify(checked.path)} passes through ${JSON.stringify(parts.slice(0, i).join('/'))}, which is ${info.isSymbolicLink() ? 'a symbolic link' : last ? 'not a regular file' : 'not a directory'}`)
        }
        if (!last) await chmod(at, 0o755)
      }
      await mkdir(join(root, ...parts.slice(0, -1)), { recursive: true, mode: 0o755 })
      const file = join(root, ...parts)
      await chmod(file, 0o644).catch(() => {})
      await writeFile(file, data, { mode: 0o644 })
      return await this.#store(root)
    } finally {
      unpin()
      await rm(tmp, { recursive: true, force: true })
    }
  }

  /** Checks an extracted tree's pack.yaml and capabilities, normalises and hashes it, and places it. */
  async #store(root: string): Promise<IngestedPack> {
    const manifest = parsePackManifest(await readSmallFile(root, 'pack.yaml', MAX_MANIFEST_BYTES, 'pack.yaml'))
    const capabilities = manifest.capabilities_file === undefined ? undefined : await readCapabilities(root, manifest.capabilities_file)
    const { digest, sizeBytes } = await normaliseAndHash(root)
    const final = this.dir(digest)
    const release = await this.#exclusive(async () => {
      if (!(await this.has(digest))) {
        await rename(root, final).catch(async (err: { code?: string }) => {
          // Another process sharing the data dir placed the same content first: same bytes.
          if (!((err.code === 'ENOTEMPTY' || err.code === 'EEXIST') && (await this.has(digest)))) throw err
        })
      }
      return this.pin(digest)
    })
    return { manifest, digest, sizeBytes, ...(capabilities !== undefined ? { capabilities } : {}), release }
  }

  /**
   * The deterministic tar of a stored tree: the very bytes `digest` hashes (so it is the pack
   * image's layer, src/packs/registry-image.ts). The caller pins the digest while reading.
   */
  tar(digest: string): Readable {
    const pack = tarStream.pack()
    const dir = this.dir(digest)
    void walk(dir).then((entries) => writeTar(pack, entries), (err: Error) => pack.destroy(err)).catch((err: Error) => pack.destroy(err))
    return Readable.from(pack as AsyncIterable<Buffer>)
  }

  /** Keeps a digest's tree from being removed until the returned function is called (e.g. while cloning). */
  pin(digest: string): Unpin {
    this.#pins.set(digest, (this.#pins.get(digest) ?? 0) + 1)
    let done = false
    return () => {
      if (done) return
      done = true
      const left = (this.#pins.get(digest) ?? 1) - 1
      if (left > 0) this.#pins.set(digest, left)
      else this.#pins.delete(digest)
    }
  }

  /**
   * Removes a digest's tree unless it is pinned or `inUse()` (asked under the same lock) says a
   * pack row still references it. Resolves whether it was removed.
   */
  async removeIfUnused(digest: string, inUse: () => Promise<boolean>): Promise<boolean> {
    return this.#exclusive(async () => {
      if (this.#pins.has(digest) || (await inUse())) return false
      await this.remove(digest)
      return true
    })
  }

  #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#gc.then(fn, fn)
    this.#gc = run.catch(() => {})
    return run
  }

  /** Removes a digest's tree unconditionally (prefer removeIfUnused). */
  async remove(digest: string): Promise<void> {
    await rm(this.dir(digest), { recursive: true, force: true })
  }

  /** Removes leftovers of ingests interrupted by a crash (call at startup). */
  async sweep(): Promise<void> {
    let names: string[]
    try {
      names = await readdir(this.root)
    } catch {
      return
    }
    for (const n of names) if (n.startsWith('.ingest-')) await rm(join(this.root, n), { recursive: true, force: true })
  }
}

async function readSmallFile(root: string, rel: string, max: number, field: string): Promise<string> {
  const path = join(root, ...rel.split('/'))
  let info
  try {
    info = await lstat(path)
  } catch {
    throw apiError('validation_error', `${rel} named by pack.yaml is not in the pack`, { fields: { [field]: `${rel} is not in the pack` } })
  }
  if (!info.isFile()) throw apiError('validation_error', `${rel} must be a regular file`, { fields: { [field]: `${rel} must be a regular file (not a link or directory)` } })
  if (info.size > max) throw apiError('validation_error', `${rel} is larger than ${max} bytes`, { fields: { [field]: `is larger than ${max} bytes` } })
  return readFile(path, 'utf8')
}

/** The fragment is lint-checked like a role's capabilities; it is never merged into a role (docs/packs.md). */
async function readCapabilities(root: string, rel: string): Promise<string> {
  const source = await readSmallFile(root, rel, MAX_CAPABILITIES_BYTES, 'capabilities')
  const result = compilePolicy(source, { file: rel })
  if (!result.ok) {
    const errors = result.diagnostics.filter((d) => d.severity === 'error')
    throw apiError('invalid_capabilities', `the pack's capabilities (${rel}) do not compile: ${errors.length} error(s), first: ${errors[0]?.message ?? 'unknown'}`, {
      diagnostics: result.diagnostics,
    })
  }
  return source
}

interface TreeEntry {
  rel: string
  abs: string
  kind: 'file' | 'directory' | 'symlink'
  executable: boolean
  size: number
  /** Permission bits as found (files only). */
  mode?: number
  linkname?: string
}

/** Every entry below `root`, depth-first, names sorted bytewise: the one order the digest uses. */
async function walk(root: string, rel = '', out: TreeEntry[] = []): Promise<TreeEntry[]> {
  const names = (await readdir(join(root, rel))).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
  for (const name of names) {
    const r = rel ? `${rel}/${name}` : name
    const abs = join(root, r)
    const info = await lstat(abs)
    if (info.isDirectory()) {
      out.push({ rel: r, abs, kind: 'directory', executable: true, size: 0 })
      await walk(root, r, out)
    } else if (info.isSymbolicLink()) {
      out.push({ rel: r, abs, kind: 'symlink', executable: false, size: 0, linkname: await readlink(abs) })
    } else if (info.isFile()) {
      out.push({ rel: r, abs, kind: 'file', executable: (info.mode & 0o111) !== 0, size: info.size, mode: info.mode & 0o7777 })
    }
  }
  return out
}

/** Sets the stored permissions and returns the digest of the deterministic tar and the file bytes. */
async function normaliseAndHash(root: string): Promise<{ digest: string; sizeBytes: number }> {
  const entries = await walk(root)
  const hash = createHash('sha256')
  const pack = tarStream.pack()
  const consumed = (async () => {
    for await (const chunk of pack) hash.update(chunk as Buffer)
  })()
  let sizeBytes = 0
  await writeTar(pack, entries, async (e) => {
    sizeBytes += e.size
    const mode = e.executable ? 0o555 : 0o444
    if (e.mode !== mode) await chmod(e.abs, mode)
  })
  await consumed
  for (const e of entries) if (e.kind === 'directory') await chmod(e.abs, 0o755)
  await chmod(root, 0o755)
  return { digest: `sha256:${hash.digest('hex')}`, sizeBytes }
}

/** The deterministic tar of walked entries (the digest's definition); `afterFile` runs after each file is written. */
async function writeTar(pack: TarPack, entries: readonly TreeEntry[], afterFile?: (e: TreeEntry) => Promise<void>): Promise<void> {
  const fixed = { mtime: EPOCH, uid: 0, gid: 0, uname: '', gname: '' }
  for (const e of entries) {
    if (e.kind === 'directory') {
      await addEntry(pack, { ...fixed, name: `${e.rel}/`, type: 'directory', mode: 0o755 })
    } else if (e.kind === 'symlink') {
      await addEntry(pack, { ...fixed, name: e.rel, type: 'symlink', mode: 0o777, linkname: e.linkname! })
    } else {
      const header = { ...fixed, name: e.rel, type: 'file' as const, mode: e.executable ? 0o755 : 0o644, size: e.size }
      // Small files in one read (per-call overhead dominates packs of many small files).
      if (e.size <= SMALL_FILE_BYTES) await addEntry(pack, header, await readFile(e.abs))
      else await addEntry(pack, header, e.abs)
      await afterFile?.(e)
    }
  }
  pack.finalize()
}

type TarPack = ReturnType<typeof tarStream.pack>
type TarHeader = Parameters<TarPack['entry']>[0]

/** Adds one entry: no body, a buffer, or a file streamed with back-pressure; resolves when written. */
function addEntry(pack: TarPack, header: TarHeader, file?: string | Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    if (file === undefined) {
      pack.entry(header, (err) => (err ? reject(err) : resolve()))
      return
    }
    if (Buffer.isBuffer(file)) {
      pack.entry(header, file, (err) => (err ? reject(err) : resolve()))
      return
    }
    const sink = pack.entry(header, (err) => (err ? reject(err) : resolve()))
    const source = createReadStream(file)
    source.on('error', reject)
    source.on('data', (chunk) => {
      if (!sink.write(chunk)) {
        source.pause()
        sink.once('drain', () => source.resume())
      }
    })
    source.on('end', () => sink.end(undefined))
  })
}

/** 400 validation_error on the edited file's path, named as schema validation errors name a field. */
function pathError(message: string) {
  return apiError('validation_error', `path ${message}`, { fields: { path: message } })
}
