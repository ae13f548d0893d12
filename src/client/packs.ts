// Typed calls for /v1/packs over the shared CorralClient and name-or-id resolution for the CLI.
// Packing a pack directory into the tar.gz the upload routes take is the CLI's (src/cli/pack-archive.ts).
import { openAsBlob } from 'node:fs'
import { ID_PREFIXES, type PackOrigin, type PackTier, type PackVisibility } from '../contract/index.js'
import type { CorralClient } from './client.js'
import { ApiConnectionError, ApiError, apiErrorFrom } from './errors.js'

/** The spec's Pack object (control-plane.md "Pack"). */
export interface PackRecord {
  id: string
  /** Absent on packs the caller's org does not own (community packs of other orgs). */
  org_id?: string
  name: string
  display_name: string
  description?: string
  version: string
  tier: PackTier
  visibility: PackVisibility
  category?: string
  capabilities?: string
  suggested_packs?: string
  image_origin?: PackOrigin
  image_ref?: string
  image_digest?: string
  size_bytes?: number
  created_at?: string
  updated_at?: string
  owned: boolean
}

/** The metadata PUT /v1/packs/{id} changes; `null` clears an optional field. */
export interface PackUpdate {
  display_name?: string
  description?: string | null
  category?: string | null
  suggested_packs?: string | null
  visibility?: PackVisibility
  /** Registry-origin packs only: pull this image and replace the pack's content. */
  image_ref?: string
}

/** What an upload sends as the `archive` part: bytes in memory, or a file opened lazily. */
export type ArchiveSource = { bytes: Uint8Array } | { file: string }

export const PACK_ID_PREFIX = `${ID_PREFIXES.pack}_`
/** The server's pack name pattern (src/packs/manifest.ts PACK_NAME_PATTERN; a test keeps them equal). */
export const PACK_NAME_RE = /^[A-Za-z][A-Za-z0-9_-]{0,63}$/
const seg = encodeURIComponent

/** Told the archive's size, then the bytes of the request body as they are handed to the socket. */
export interface UploadProgress {
  start(archiveBytes: number): void
  sent(bytes: number): void
}

/** The multipart body as a stream that reports each chunk as it is read for sending. */
function countedBody(form: FormData, headers: Record<string, string>, progress: UploadProgress): RequestInit {
  const encoded = new Request('http://corral.invalid/', { method: 'POST', body: form })
  const counter = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      progress.sent(chunk.byteLength)
      controller.enqueue(chunk)
    },
  })
  return {
    headers: { ...headers, 'content-type': encoded.headers.get('content-type')! },
    body: encoded.body!.pipeThrough(counter),
    duplex: 'half',
  } as RequestInit
}

export function packsApi(client: CorralClient) {
  /** multipart/form-data with the `archive` part (and form fields), as the upload routes take it. */
  async function sendArchive(method: 'POST' | 'PUT', path: string, source: ArchiveSource, fields: Record<string, string | undefined>, progress?: UploadProgress): Promise<PackRecord> {
    const form = new FormData()
    for (const [k, v] of Object.entries(fields)) if (v !== undefined) form.append(k, v)
    // openAsBlob streams the file when the request is sent instead of reading it into memory first.
    const blob = 'file' in source ? await openAsBlob(source.file, { type: 'application/gzip' }) : new Blob([source.bytes], { type: 'application/gzip' })
    form.append('archive', blob, 'pack.tar.gz')
    progress?.start(blob.size)
    let res: Response
    try {
      res = await client.fetchImpl(client.url(path), { method, ...(progress ? countedBody(form, client.headers(), progress) : { headers: client.headers(), body: form }) })
    } catch (err) {
      throw new ApiConnectionError(client.apiUrl, err)
    }
    if (!res.ok) throw await apiErrorFrom(res)
    return (await res.json()) as PackRecord
  }

  const api = {
    listPacks: async (opts: { owned?: boolean; name?: string } = {}) =>
      (await client.request<{ packs: PackRecord[] }>('GET', '/packs', { query: { owned: opts.owned ? 'true' : undefined, name: opts.name } })).packs,
    getPack: (id: string) => client.request<PackRecord>('GET', `/packs/${seg(id)}`),
    uploadPack: (source: ArchiveSource, opts: { visibility?: PackVisibility; progress?: UploadProgress } = {}) =>
      sendArchive('POST', '/packs/upload', source, { visibility: opts.visibility }, opts.progress),
    /** A pack from a registry image (`POST /v1/packs`): the server pulls `image_ref`. */
    createPack: (body: { image_ref: string; visibility?: PackVisibility }) => client.request<PackRecord>('POST', '/packs', { body }),
    reuploadPack: (id: string, source: ArchiveSource, opts: { progress?: UploadProgress } = {}) => sendArchive('PUT', `/packs/${seg(id)}/upload`, source, {}, opts.progress),
    /** One file's new content (`PUT /v1/packs/{id}/files/{path}`); `path` is sent as one segment. */
    async editPackFile(id: string, path: string, content: Uint8Array): Promise<PackRecord> {
      let res: Response
      try {
        res = await client.fetchImpl(client.url(`/packs/${seg(id)}/files/${encodeURIComponent(path)}`), {
          method: 'PUT', headers: { ...client.headers(), 'content-type': 'application/octet-stream' }, body: content,
        })
      } catch (err) {
        throw new ApiConnectionError(client.apiUrl, err)
      }
      if (!res.ok) throw await apiErrorFrom(res)
      return (await res.json()) as PackRecord
    },
    updatePack: (id: string, body: PackUpdate) => client.request<PackRecord>('PUT', `/packs/${seg(id)}`, { body }),
    deletePack: (id: string) => client.request<{ status: 'deleted' }>('DELETE', `/packs/${seg(id)}`),
    clonePack: (id: string, opts: { name?: string } = {}) =>
      client.request<PackRecord>('POST', `/packs/${seg(id)}/clone`, { body: opts.name === undefined ? {} : { name: opts.name } }),

    /** A `pack_…` id as is, else the visible pack with that name (see pickByName). */
    async resolvePack(ref: string): Promise<PackRecord> {
      if (ref.startsWith(PACK_ID_PREFIX)) return api.getPack(ref)
      // A ref no pack could be named gets the same answer as an unknown name, not a query-string error.
      return pickByName(PACK_NAME_RE.test(ref) ? await api.listPacks({ name: ref }) : [], ref)
    },

    /**
     * Pack names or ids (a role file's `packs:`) to ids, in order, with one list call. Every
     * unknown name is reported in one error; ids are passed through for the server to check.
     */
    async resolvePackIds(refs: readonly string[]): Promise<string[]> {
      const names = refs.filter((r) => !r.startsWith(PACK_ID_PREFIX))
      if (names.length === 0) return [...refs]
      const visible = await api.listPacks()
      const missing = names.filter((n) => !visible.some((p) => p.name === n))
      if (missing.length) {
        throw new ApiError(404, {
          code: 'not_found',
          message: `no pack named ${missing.join(', ')} is visible to this organisation (see corral pack list)`,
          details: { packs: missing },
        })
      }
      return refs.map((r) => (r.startsWith(PACK_ID_PREFIX) ? r : pickByName(visible, r).id))
    },
  }
  return api
}
export type PacksApi = ReturnType<typeof packsApi>

/**
 * Pack names are unique within an org, but a community pack of another org may share a name:
 * the caller's own pack wins, then a single community pack; several community packs with the
 * name are ambiguous and must be named by id.
 */
export function pickByName(packs: readonly PackRecord[], name: string): PackRecord {
  const named = packs.filter((p) => p.name === name)
  const own = named.find((p) => p.owned)
  if (own) return own
  if (named.length === 1) return named[0]
  if (named.length === 0) throw new ApiError(404, { code: 'not_found', message: `no pack named ${name} is visible to this organisation (see corral pack list)` })
  throw new ApiError(409, {
    code: 'ambiguous_name',
    message: `${named.length} community packs are named ${name}; name one by id (${named.map((p) => p.id).join(', ')})`,
    details: { ids: named.map((p) => p.id) },
  })
}
