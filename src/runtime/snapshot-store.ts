import { randomUUID } from 'node:crypto'
import { closeSync, fstatSync, openSync, readSync } from 'node:fs'
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises'
import { extname, join } from 'node:path'
import { Header, type HeaderData, Pax } from 'tar'
import { type Archiver, defaultArchiver } from './archiver.js'
import { RuntimeError } from './errors.js'
import type { Owner } from './held-dir.js'
import type { SnapshotFileEntry, SnapshotReason, SnapshotRecord } from './runtime.js'

const MANIFEST = 'manifest.json'
/** Two zero blocks: the end-of-archive marker, i.e. a valid tar with no entries. */
const EMPTY_TAR = Buffer.alloc(1024)

/**
 * The snapshots of one workspace: uncompressed tars of /data plus a manifest recording each one's
 * task count. Uncompressed on purpose: a fork of 100 MB must restore within seconds, and listing
 * walks the headers by seeking from one to the next, which compression would rule out.
 */
export class TarSnapshots {
  readonly #dir: string
  readonly #workspaceId: string
  readonly #archiver: Archiver | undefined

  /** `archiver` defaults to GNU tar when present, else the tar package (see archiver.ts). */
  constructor(dir: string, workspaceId: string, archiver?: Archiver) {
    this.#dir = dir
    this.#workspaceId = workspaceId
    this.#archiver = archiver
  }

  /** Archives `dataDir` (every entry, relative paths) and records it; read as `owner` when given (archiver.ts). */
  async create(dataDir: string, taskCount: number, reason: SnapshotReason, owner?: Owner | null): Promise<SnapshotRecord> {
    return this.createWith(async (partial) => {
      const top = (await readdir(dataDir)).sort()
      if (top.length === 0) await writeFile(partial, EMPTY_TAR)
      else await (this.#archiver ?? (await defaultArchiver())).create(dataDir, top, partial, owner)
    }, taskCount, reason)
  }

  /** Records the tar that `write` puts at the host path it is given (a volume archived elsewhere: a pod's). */
  async createWith(write: (file: string) => Promise<void>, taskCount: number, reason: SnapshotReason): Promise<SnapshotRecord> {
    await mkdir(this.#dir, { recursive: true })
    const records = await this.list()
    const seq = records.length === 0 ? 1 : Math.max(...records.map((r) => seqOf(r.ref))) + 1
    const name = `${String(seq).padStart(6, '0')}-t${taskCount}-${reason}.tar`
    const partial = join(this.#dir, `.${name}.${randomUUID()}.partial`)
    try {
      await write(partial)
    } catch (err) {
      await rm(partial, { force: true })
      throw err
    }
    await rename(partial, join(this.#dir, name))
    const record: SnapshotRecord = {
      ref: `${this.#workspaceId}/${name}`,
      workspaceId: this.#workspaceId,
      taskCount,
      reason,
      createdAt: new Date().toISOString(),
      sizeBytes: (await stat(join(this.#dir, name))).size,
    }
    await this.#writeManifest([...records, record])
    return record
  }

  async list(): Promise<SnapshotRecord[]> {
    try {
      return JSON.parse(await readFile(join(this.#dir, MANIFEST), 'utf8')) as SnapshotRecord[]
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return []
      throw err
    }
  }

  /**
   * The snapshot a fork at `taskCount` restores: the one taken right after that many tasks
   * completed. A stop snapshot at the same count is the fallback (a workspace stopped before its
   * after-task snapshot was recorded); the latest wins when several qualify.
   */
  async at(taskCount: number): Promise<SnapshotRecord | null> {
    const same = (await this.list()).filter((r) => r.taskCount === taskCount)
    const preferred = same.filter((r) => r.reason === 'task')
    const pool = preferred.length > 0 ? preferred : same
    return pool.at(-1) ?? null
  }

  async get(ref?: string): Promise<SnapshotRecord> {
    const records = await this.list()
    const found = ref === undefined ? records.at(-1) : records.find((r) => r.ref === ref)
    if (!found) {
      throw new RuntimeError('not_found', ref === undefined
        ? `workspace ${this.#workspaceId} has no snapshot yet`
        : `snapshot ${ref} does not exist`, { workspace_id: this.#workspaceId })
    }
    return found
  }

  /** The host path of a snapshot's tar. */
  file(record: SnapshotRecord): string {
    return this.#path(record)
  }

  /** Unpacks a snapshot into `dir` (which must exist, owned by `owner` when given). */
  async restore(record: SnapshotRecord, dir: string, owner?: Owner | null): Promise<void> {
    await (this.#archiver ?? (await defaultArchiver())).extract(this.#path(record), dir, owner)
  }

  /** Reads the archive's headers only, seeking over every entry's body (nothing is unpacked). */
  async files(record: SnapshotRecord): Promise<SnapshotFileEntry[]> {
    return readTarIndex(this.#path(record))
  }

  async remove(): Promise<void> {
    await rm(this.#dir, { recursive: true, force: true })
  }

  #path(record: SnapshotRecord): string {
    return join(this.#dir, record.ref.slice(record.ref.indexOf('/') + 1))
  }

  async #writeManifest(records: SnapshotRecord[]): Promise<void> {
    const partial = join(this.#dir, `.${MANIFEST}.${randomUUID()}.partial`)
    await writeFile(partial, JSON.stringify(records, null, 1))
    await rename(partial, join(this.#dir, MANIFEST))
  }
}

function seqOf(ref: string): number {
  return Number.parseInt(ref.slice(ref.indexOf('/') + 1), 10) || 0
}

/** One entry of a tar as walkTar finds it: its header fields and where its records lie in the file. */
export interface TarRecord {
  /** The path with `./` and trailing slashes removed ('' for the archive's root entry). */
  path: string
  type: string
  size: number
  mode: number
  mtime: number
  linkpath?: string
  /** Offset of the entry's first record (its pax or long-name header when it has one). */
  start: number
  /** Offset of its body, and the offset after its padded body. */
  bodyAt: number
  end: number
}

/**
 * Walks a tar's 512-byte headers, applying pax and GNU long-name records to the entry they precede.
 * Synchronous preads on purpose: one small read per entry, and under load the thread pool's round
 * trip would dominate (docs/runtime.md has the figures); the event loop pays a few microseconds per
 * entry instead. `visit` returning false stops the walk.
 */
// long-function: one header loop with its pax, global and long-name cases, kept together as tar defines them
export function walkTar(file: string, visit: (r: TarRecord) => boolean | void): void {
  const fd = openSync(file, 'r')
  try {
    const total = fstatSync(fd).size
    // A pax entry is three consecutive blocks (pax header, pax body, file header): one read of a
    // small window usually covers them all, so most entries cost a single pread.
    let window = Buffer.alloc(0)
    let windowAt = 0
    const readAt = (at: number, length: number): Buffer => {
      if (at < windowAt || at + length > windowAt + window.length) {
        window = Buffer.alloc(Math.max(length, 4096))
        window = window.subarray(0, readSync(fd, window, 0, window.length, at))
        windowAt = at
      }
      return window.subarray(at - windowAt, at - windowAt + length)
    }
    let offset = 0
    let start = 0
    let ex: HeaderData | undefined
    let gex: HeaderData | undefined
    // The pax mtime as written ("1772600767.123"): Pax.parse goes through a float and a Date and
    // can lose the last millisecond, so the text is kept and rounded here.
    let paxMtime: number | undefined
    while (offset + 512 <= total) {
      const header = new Header(readAt(offset, 512), 0, ex, gex)
      if (header.nullBlock) break
      if (!header.cksumValid) throw new Error(`${file}: corrupt tar header at byte ${offset}`)
      const size = header.size ?? 0
      const bodyAt = offset + 512
      offset = bodyAt + Math.ceil(size / 512) * 512
      const body = (): string => readAt(bodyAt, size).toString('utf8')
      switch (header.type) {
        case 'ExtendedHeader': {
          const text = body()
          ex = Pax.parse(text, ex, false)
          const m = /(?:^|\n)\d+ mtime=([0-9.]+)\n/.exec(text)
          paxMtime = m ? Math.round(Number.parseFloat(m[1]) * 1000) / 1000 : undefined
          continue
        }
        case 'GlobalExtendedHeader':
          gex = Pax.parse(body(), gex, true)
          start = offset
          continue
        case 'NextFileHasLongPath':
        case 'OldGnuLongPath':
          ex = { ...ex, path: body().replace(/\0.*$/s, '') }
          continue
        case 'NextFileHasLongLinkpath':
          ex = { ...ex, linkpath: body().replace(/\0.*$/s, '') }
          continue
        default:
          break
      }
      const mtime = paxMtime ?? (header.mtime?.getTime() ?? 0) / 1000
      const record: TarRecord = {
        path: (header.path ?? '').replace(/^\.\//, '').replace(/\/+$/, ''),
        type: header.type ?? 'File', size, mode: header.mode ?? 0o644, mtime, start, bodyAt, end: offset,
        ...(header.linkpath ? { linkpath: header.linkpath } : {}),
      }
      ex = undefined
      paxMtime = undefined
      start = offset
      if (record.path === '.') record.path = ''
      if (visit(record) === false) return
    }
  } finally {
    closeSync(fd)
  }
}

/** The snapshot file entries of a tar (spec "Snapshot file entry"), in archive order. */
export function readTarIndex(file: string): SnapshotFileEntry[] {
  const entries: SnapshotFileEntry[] = []
  walkTar(file, (r) => {
    if (r.path === '') return
    entries.push(entryOf(r))
  })
  return entries
}

export function entryOf(r: TarRecord): SnapshotFileEntry {
  const isDir = r.type === 'Directory'
  const entry: SnapshotFileEntry = { path: r.path, size: isDir ? 0 : r.size, is_dir: isDir, mtime: r.mtime, readonly: (r.mode & 0o222) === 0 }
  const mime = isDir ? undefined : mimeType(r.path)
  if (mime) entry.mime_type = mime
  return entry
}

// A short table covers what agents write; anything else is left without a mime_type (optional in
// the spec) rather than guessed.
const MIME: Record<string, string> = {
  '.txt': 'text/plain', '.md': 'text/markdown', '.csv': 'text/csv', '.tsv': 'text/tab-separated-values',
  '.json': 'application/json', '.jsonl': 'application/x-ndjson', '.yaml': 'application/yaml', '.yml': 'application/yaml',
  '.xml': 'application/xml', '.html': 'text/html', '.htm': 'text/html', '.css': 'text/css',
  '.js': 'text/javascript', '.mjs': 'text/javascript', '.ts': 'text/x-typescript', '.py': 'text/x-python',
  '.sh': 'application/x-sh', '.go': 'text/x-go', '.rs': 'text/x-rust', '.java': 'text/x-java', '.c': 'text/x-c',
  '.h': 'text/x-c', '.cpp': 'text/x-c++', '.sql': 'application/sql', '.toml': 'application/toml', '.log': 'text/plain',
  '.pdf': 'application/pdf', '.png': 'image/png', '.jpg': 'image/jpeg', '.jpeg': 'image/jpeg', '.gif': 'image/gif',
  '.svg': 'image/svg+xml', '.webp': 'image/webp', '.zip': 'application/zip', '.gz': 'application/gzip',
  '.tar': 'application/x-tar', '.wasm': 'application/wasm', '.bin': 'application/octet-stream',
}

export function mimeType(path: string): string | undefined {
  return MIME[extname(path).toLowerCase()]
}
