// The shared SnapshotStore: every snapshot an OCI artifact in the registry packs use
// (CORRAL_PACK_REGISTRY), so any replica lists, restores and forks any workspace's snapshots
// (docs/workspaces.md "Snapshots in the registry"). One repository per workspace,
// `<namespace>/corral-snapshots/<workspace id>`:
//   - each snapshot is an image manifest tagged `<seq>-t<tasks>-<reason>` whose config blob is the
//     SnapshotRecord, whose first layer is the uncompressed tar of /data and whose second layer is
//     its file index (JSON), so a listing reads the index blob and never pulls the archive;
//   - the tag `catalog` names a manifest whose one layer lists every snapshot with the digests of
//     its blobs. Pushing the new catalog is the commit point of a snapshot: when the registry fails
//     before it, the snapshot does not exist (its blobs are unreferenced; registry GC reclaims them).
// Blobs are read by digest and verified (size and sha256) before anything is unpacked: a restore
// downloads to a scratch file first, so a corrupt or missing blob leaves the volume untouched.
// The OCI client is the one of src/packs/ (RegistryClient), handed in by serve: runtime imports no
// other part, so the store names only the methods it calls (OciClient below).
import { createHash } from 'node:crypto'
import { createReadStream, createWriteStream } from 'node:fs'
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { type Archiver, defaultArchiver } from './archiver.js'
import { RuntimeError } from './errors.js'
import { HostVolume } from './host-volume.js'
import { isArchivable, type SnapshotContent, type SnapshotFileEntry, type SnapshotReason, type SnapshotRecord, type SnapshotStore, type WorkspaceVolume } from './runtime.js'
import { tarContent } from './snapshot-content.js'
import { readTarIndex } from './snapshot-store.js'

export const SNAPSHOT_MEDIA_TYPES = {
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  config: 'application/vnd.corral.snapshot.config.v1+json',
  archive: 'application/vnd.oci.image.layer.v1.tar',
  files: 'application/vnd.corral.snapshot.files.v1+json',
  catalogConfig: 'application/vnd.oci.empty.v1+json',
  catalog: 'application/vnd.corral.snapshot.catalog.v1+json',
} as const

export interface OciDescriptor {
  mediaType: string
  digest: string
  size: number
}

export interface OciRef {
  registry: string
  repository: string
  tag?: string
  digest?: string
}

/** What the store asks of an OCI distribution client (src/packs/ RegistryClient fits it). */
export interface OciClient {
  getManifest(ref: OciRef): Promise<{ manifest: { layers: OciDescriptor[] }; digest: string }>
  fetchBlob(ref: OciRef, desc: OciDescriptor): Promise<Readable>
  pushBlob(ref: OciRef, desc: { digest: string; size: number }, body: () => Readable | Buffer): Promise<void>
  putManifest(ref: OciRef, reference: string, bytes: Buffer, mediaType: string): Promise<string>
  deleteManifest(ref: OciRef, digest: string): Promise<boolean>
}

export interface RegistrySnapshotStoreOptions {
  client: OciClient
  /** `host[:port]` of the registry. */
  registry: string
  /** Repository prefix (CORRAL_PACK_REGISTRY's path); '' for none. */
  namespace: string
  /**
   * Where archives are staged on this host on their way in and out; default the OS temp dir. A
   * directory of this store's own (serve's: `<data-dir>/runtime/snapshot-scratch`) is swept of a
   * crashed process's leftovers before first use: pass `ownScratch: true` then.
   */
  scratchDir?: string
  ownScratch?: boolean
  archiver?: Archiver
}

/** A volume the registry store can archive besides host directories; ArchivableVolume (runtime.ts) is preferred. */
export interface TarVolume extends WorkspaceVolume {
  /** Writes an uncompressed tar of /data (relative paths) to the host file `file`. */
  writeTar(file: string): Promise<void>
  /** Unpacks the host tar `file` into /data (empty, a fork's new volume). */
  readTar(file: string): Promise<void>
}

/** One snapshot in the catalog: its record and where its blobs are. */
interface CatalogEntry {
  record: SnapshotRecord
  manifest: string
  archive: OciDescriptor
  files: OciDescriptor
}

const CATALOG_TAG = 'catalog'
const EMPTY_JSON = Buffer.from('{}')
/** Two zero blocks: a valid tar with no entries. */
const EMPTY_TAR = Buffer.alloc(1024)
/** File-index cache bound, in entries over all cached indexes (~150 bytes each: ~30 MB). */
const MAX_CACHED_ENTRIES = 200_000
const SCRATCH_PREFIX = 'corral-snapshot-'
const COMPONENT_RE = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/

export class RegistrySnapshotStore implements SnapshotStore {
  readonly #opts: RegistrySnapshotStoreOptions
  /** File indexes by blob digest (immutable: content-addressed), oldest first; #cachedEntries in all. */
  readonly #indexes = new Map<string, SnapshotFileEntry[]>()
  #cachedEntries = 0
  /** Catalog writes of this process, one at a time per workspace. */
  readonly #writing = new Map<string, Promise<unknown>>()
  #swept: Promise<void> | undefined

  constructor(options: RegistrySnapshotStoreOptions) {
    this.#opts = options
  }

  /** Where the workspace's snapshots live, e.g. `127.0.0.1:5000/corral/corral-snapshots/ws_…`. */
  repositoryOf(workspaceId: string): string {
    const id = COMPONENT_RE.test(workspaceId) ? workspaceId : `h-${createHash('sha256').update(workspaceId).digest('hex').slice(0, 40)}`
    return [this.#opts.namespace, 'corral-snapshots', id].filter(Boolean).join('/')
  }

  put(volume: WorkspaceVolume, taskCount: number, reason: SnapshotReason): Promise<SnapshotRecord> {
    return this.#serial(volume.workspaceId, () => this.#put(volume, taskCount, reason))
  }

  async list(workspaceId: string): Promise<SnapshotRecord[]> {
    return (await this.#catalog(workspaceId)).entries.map((e) => e.record)
  }

  /** As LocalSnapshotStore: the after-task snapshot at that count, else a stop snapshot; the latest wins. */
  async at(workspaceId: string, taskCount: number): Promise<SnapshotRecord | null> {
    const same = (await this.list(workspaceId)).filter((r) => r.taskCount === taskCount)
    const preferred = same.filter((r) => r.reason === 'task')
    return (preferred.length > 0 ? preferred : same).at(-1) ?? null
  }

  async entries(workspaceId: string, ref?: string): Promise<SnapshotFileEntry[]> {
    const entry = this.#find((await this.#catalog(workspaceId)).entries, workspaceId, ref)
    const cached = this.#indexes.get(entry.files.digest)
    if (cached) return cached
    const bytes = await this.#call(`reading the file index of snapshot ${entry.record.ref}`, async () => {
      const chunks: Buffer[] = []
      for await (const chunk of await this.#opts.client.fetchBlob(this.#ref(workspaceId), entry.files)) chunks.push(chunk as Buffer)
      return Buffer.concat(chunks)
    })
    const files = parseIndex(bytes, entry.record.ref)
    this.#cache(entry.files.digest, files)
    return files
  }

  /**
   * One path of a snapshot: the archive layer is downloaded (verified) to a scratch file of its own,
   * read there, and the scratch file removed once the answer is streamed. A file cannot be read
   * from the registry without the archive: a blob has no index of byte ranges we can trust alone.
   */
  async content(record: SnapshotRecord, path: string): Promise<SnapshotContent> {
    const entry = this.#find((await this.#catalog(record.workspaceId)).entries, record.workspaceId, record.ref)
    const dir = await this.#scratch()
    const release = (): void => void rm(dir, { recursive: true, force: true })
    try {
      await this.#download(record, entry, join(dir, 'snapshot.tar'))
    } catch (err) {
      release()
      throw err
    }
    return tarContent(join(dir, 'snapshot.tar'), path, release)
  }

  async restore(record: SnapshotRecord, into: WorkspaceVolume): Promise<void> {
    const entry = this.#find((await this.#catalog(record.workspaceId)).entries, record.workspaceId, record.ref)
    await this.#withScratch(async (dir) => {
      const file = join(dir, 'snapshot.tar')
      await this.#download(record, entry, file)
      if (into instanceof HostVolume) await (this.#opts.archiver ?? (await defaultArchiver())).extract(file, into.hostDir, into.owner)
      else await tarVolume(into).readTar(file)
    })
  }

  /**
   * Forgets every snapshot of the workspace: an empty catalog first (from then on nothing lists),
   * then each manifest deleted where the registry allows deletes (its blobs go at registry GC).
   */
  remove(workspaceId: string): Promise<void> {
    return this.#serial(workspaceId, async () => {
      const { entries } = await this.#catalog(workspaceId)
      const emptied = await this.#pushCatalog(workspaceId, [])
      const ref = this.#ref(workspaceId)
      await this.#call(`deleting the snapshots of workspace ${workspaceId}`, async () => {
        for (const e of entries) await this.#opts.client.deleteManifest(ref, e.manifest)
        await this.#opts.client.deleteManifest(ref, emptied)
      })
    })
  }

  // long-function: one snapshot's steps in commit order (archive, index, blobs, manifest, catalog)
  async #put(volume: WorkspaceVolume, taskCount: number, reason: SnapshotReason): Promise<SnapshotRecord> {
    const workspaceId = volume.workspaceId
    return this.#withScratch(async (dir) => {
      const file = join(dir, 'snapshot.tar')
      await this.#archive(volume, file)
      const archive = { mediaType: SNAPSHOT_MEDIA_TYPES.archive, ...(await digestFile(file)) }
      const index = Buffer.from(JSON.stringify(readTarIndex(file)))
      const files = { mediaType: SNAPSHOT_MEDIA_TYPES.files, digest: sha256(index), size: index.length }
      const { entries } = await this.#catalog(workspaceId)
      const seq = entries.length === 0 ? 1 : Math.max(...entries.map((e) => seqOf(e.record.ref))) + 1
      const tag = `${String(seq).padStart(6, '0')}-t${taskCount}-${reason}`
      const record: SnapshotRecord = {
        ref: `${workspaceId}/${tag}`, workspaceId, taskCount, reason, createdAt: new Date().toISOString(), sizeBytes: archive.size,
      }
      const config = Buffer.from(JSON.stringify(record))
      const configDesc = { mediaType: SNAPSHOT_MEDIA_TYPES.config, digest: sha256(config), size: config.length }
      const ref = this.#ref(workspaceId)
      const manifest = await this.#call(`pushing snapshot ${record.ref}`, async () => {
        await this.#opts.client.pushBlob(ref, archive, () => createReadStream(file))
        await this.#opts.client.pushBlob(ref, files, () => index)
        await this.#opts.client.pushBlob(ref, configDesc, () => config)
        const bytes = manifestBytes(configDesc, [archive, files], { 'dev.corral.workspace': workspaceId, 'org.opencontainers.image.created': record.createdAt })
        return this.#opts.client.putManifest(ref, tag, bytes, SNAPSHOT_MEDIA_TYPES.manifest)
      })
      await this.#pushCatalog(workspaceId, [...entries, { record, manifest, archive, files }])
      this.#cache(files.digest, JSON.parse(index.toString('utf8')) as SnapshotFileEntry[])
      return record
    })
  }

  async #archive(volume: WorkspaceVolume, file: string): Promise<void> {
    if (!(volume instanceof HostVolume)) return tarVolume(volume).writeTar(file)
    const top = (await readdir(volume.hostDir)).sort()
    if (top.length === 0) await writeFile(file, EMPTY_TAR)
    else await (this.#opts.archiver ?? (await defaultArchiver())).create(volume.hostDir, top, file, volume.owner)
  }

  /** The workspace's catalog; empty when the registry has none (never snapshotted, or removed). */
  async #catalog(workspaceId: string): Promise<{ entries: CatalogEntry[] }> {
    const ref = this.#ref(workspaceId)
    return this.#call(`reading the snapshot catalog of workspace ${workspaceId}`, async () => {
      let layer: OciDescriptor
      try {
        const { manifest } = await this.#opts.client.getManifest({ ...ref, tag: CATALOG_TAG })
        layer = manifest.layers[0]!
      } catch (err) {
        if ((err as { kind?: string }).kind === 'not_found') return { entries: [] }
        throw err
      }
      if (layer.mediaType !== SNAPSHOT_MEDIA_TYPES.catalog) throw new Error(`the catalog's layer is ${layer.mediaType}, not ${SNAPSHOT_MEDIA_TYPES.catalog}`)
      const chunks: Buffer[] = []
      for await (const chunk of await this.#opts.client.fetchBlob(ref, layer)) chunks.push(chunk as Buffer)
      return { entries: parseCatalog(Buffer.concat(chunks), workspaceId) }
    })
  }

  /** Pushes the catalog blob and points the `catalog` tag at it: the commit point. Resolves with its manifest digest. */
  async #pushCatalog(workspaceId: string, entries: CatalogEntry[]): Promise<string> {
    const ref = this.#ref(workspaceId)
    const body = Buffer.from(JSON.stringify({ workspace_id: workspaceId, snapshots: entries }))
    const layer = { mediaType: SNAPSHOT_MEDIA_TYPES.catalog, digest: sha256(body), size: body.length }
    const config = { mediaType: SNAPSHOT_MEDIA_TYPES.catalogConfig, digest: sha256(EMPTY_JSON), size: EMPTY_JSON.length }
    return this.#call(`recording the snapshot catalog of workspace ${workspaceId}`, async () => {
      await this.#opts.client.pushBlob(ref, config, () => EMPTY_JSON)
      await this.#opts.client.pushBlob(ref, layer, () => body)
      return this.#opts.client.putManifest(ref, CATALOG_TAG, manifestBytes(config, [layer], { 'dev.corral.workspace': workspaceId }), SNAPSHOT_MEDIA_TYPES.manifest)
    })
  }

  /** Keeps an index, evicting the oldest while the bound is exceeded (an index over the bound is not kept). */
  #cache(digest: string, files: SnapshotFileEntry[]): void {
    if (files.length > MAX_CACHED_ENTRIES || this.#indexes.has(digest)) return
    this.#indexes.set(digest, files)
    this.#cachedEntries += files.length
    for (const [oldest, list] of this.#indexes) {
      if (this.#cachedEntries <= MAX_CACHED_ENTRIES) break
      this.#indexes.delete(oldest)
      this.#cachedEntries -= list.length
    }
  }

  #find(entries: CatalogEntry[], workspaceId: string, ref?: string): CatalogEntry {
    const found = ref === undefined ? entries.at(-1) : entries.find((e) => e.record.ref === ref)
    if (!found) {
      throw new RuntimeError('not_found', ref === undefined ? `workspace ${workspaceId} has no snapshot yet` : `snapshot ${ref} does not exist`, { workspace_id: workspaceId })
    }
    return found
  }

  #ref(workspaceId: string): OciRef {
    return { registry: this.#opts.registry, repository: this.repositoryOf(workspaceId) }
  }

  /** Runs a registry step; any failure becomes one RuntimeError naming the step and the registry. */
  async #call<T>(what: string, step: () => Promise<T>): Promise<T> {
    try {
      return await step()
    } catch (err) {
      if (err instanceof RuntimeError) throw err
      throw new RuntimeError('runtime_unavailable', `snapshot registry ${this.#opts.registry}: ${what} failed: ${(err as Error).message}`, undefined, { cause: err })
    }
  }

  async #download(record: SnapshotRecord, entry: CatalogEntry, file: string): Promise<void> {
    await this.#call(`downloading snapshot ${record.ref}`, async () => {
      await pipeline(await this.#opts.client.fetchBlob(this.#ref(record.workspaceId), entry.archive), createWriteStream(file, { mode: 0o600 }))
    })
  }

  async #scratch(): Promise<string> {
    const parent = this.#opts.scratchDir ?? tmpdir()
    this.#swept ??= (async () => {
      await mkdir(parent, { recursive: true })
      if (!this.#opts.ownScratch) return
      for (const name of await readdir(parent)) if (name.startsWith(SCRATCH_PREFIX)) await rm(join(parent, name), { recursive: true, force: true })
    })()
    await this.#swept
    return mkdtemp(join(parent, SCRATCH_PREFIX))
  }

  async #withScratch<T>(work: (dir: string) => Promise<T>): Promise<T> {
    const dir = await this.#scratch()
    try {
      return await work(dir)
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  }

  #serial<T>(workspaceId: string, work: () => Promise<T>): Promise<T> {
    const before = this.#writing.get(workspaceId) ?? Promise.resolve()
    const run = before.catch(() => {}).then(work)
    const settled = run.catch(() => {})
    this.#writing.set(workspaceId, settled)
    void settled.then(() => {
      if (this.#writing.get(workspaceId) === settled) this.#writing.delete(workspaceId)
    })
    return run
  }
}

/** A volume's tar in and out: ArchivableVolume (the contract's, runtime.ts), else TarVolume. */
function tarVolume(volume: WorkspaceVolume): { writeTar(file: string): Promise<void>; readTar(file: string): Promise<void> } {
  if (isArchivable(volume)) return { writeTar: (f) => volume.archiveTo(f), readTar: (f) => volume.extractFrom(f) }
  const v = volume as Partial<TarVolume>
  if (typeof v.writeTar === 'function' && typeof v.readTar === 'function') return volume as TarVolume
  throw new RuntimeError('runtime_unavailable', `the registry snapshot store cannot reach the /data of workspace ${volume.workspaceId} (neither a host directory nor a tar volume)`)
}

function manifestBytes(config: OciDescriptor, layers: OciDescriptor[], annotations: Record<string, string>): Buffer {
  return Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: SNAPSHOT_MEDIA_TYPES.manifest, config, layers, annotations }))
}

function parseCatalog(bytes: Buffer, workspaceId: string): CatalogEntry[] {
  let json: { snapshots?: unknown }
  try {
    json = JSON.parse(bytes.toString('utf8')) as { snapshots?: unknown }
  } catch {
    throw new Error(`the snapshot catalog of workspace ${workspaceId} is not JSON`)
  }
  const entries = json.snapshots
  const isDesc = (d: unknown): d is OciDescriptor => {
    const x = d as OciDescriptor | undefined
    return !!x && typeof x.digest === 'string' && /^sha256:[0-9a-f]{64}$/.test(x.digest) && Number.isSafeInteger(x.size) && typeof x.mediaType === 'string'
  }
  const ok = Array.isArray(entries) && entries.every((e: Partial<CatalogEntry>) =>
    !!e && typeof e.record?.ref === 'string' && e.record.workspaceId === workspaceId && typeof e.manifest === 'string' && isDesc(e.archive) && isDesc(e.files))
  if (!ok) throw new Error(`the snapshot catalog of workspace ${workspaceId} is malformed`)
  return entries as CatalogEntry[]
}

function parseIndex(bytes: Buffer, ref: string): SnapshotFileEntry[] {
  try {
    const files = JSON.parse(bytes.toString('utf8')) as unknown
    if (Array.isArray(files)) return files as SnapshotFileEntry[]
  } catch {
    // fall through
  }
  throw new RuntimeError('runtime_unavailable', `the file index of snapshot ${ref} is malformed`)
}

async function digestFile(file: string): Promise<{ digest: string; size: number }> {
  const hash = createHash('sha256')
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer)
  return { digest: `sha256:${hash.digest('hex')}`, size: (await stat(file)).size }
}

function sha256(bytes: Buffer): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`
}

function seqOf(ref: string): number {
  return Number.parseInt(ref.slice(ref.indexOf('/') + 1), 10) || 0
}
