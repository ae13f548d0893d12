// Packs as OCI images. Push: a stored tree becomes an image of one uncompressed layer — the
// content store's deterministic tar, so the layer digest IS the pack's image_digest — plus a
// minimal config and a manifest annotated with the pack's name and version. Pull: the image's
// layers are downloaded (digest-verified) into a scratch directory under the content store,
// flattened (registry-layers.ts) and ingested like an uploaded archive. Rules: docs/packs.md "Registry".
import { createWriteStream } from 'node:fs'
import { mkdir, mkdtemp, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { pipeline } from 'node:stream/promises'
import { apiError } from '../contract/index.js'
import type { IngestedPack, PackContent } from './content.js'
import { flattenLayers } from './registry-layers.js'
import { OCI_MANIFEST, RegistryError, bufferBody, formatImageRef, parseImageRef, sha256, type Descriptor, type ImageRef } from './registry.js'
import { checkAllowed, type RegistrySettings } from './registry-settings.js'

export const LAYER_TAR = 'application/vnd.oci.image.layer.v1.tar'
const OCI_CONFIG = 'application/vnd.oci.image.config.v1+json'
/** Layer media types a pull accepts (the bytes decide gzip or not: tar+gzip is detected by its magic). */
export const PULLABLE_LAYERS: ReadonlySet<string> = new Set([
  LAYER_TAR,
  'application/vnd.oci.image.layer.v1.tar+gzip',
  'application/vnd.docker.image.rootfs.diff.tar.gzip',
  'application/vnd.docker.image.rootfs.diff.tar',
])
/** Most layers in a pulled image. */
const MAX_LAYERS = 128

export interface PushTarget {
  /** Owning org id: the image goes under `<namespace>/<org id>/`. */
  orgId: string
  name: string
  version: string
  /** The stored tree (pinned by the caller for the duration). */
  digest: string
}

/** A repository path component for an org id or pack name (lower-cased: OCI repositories are). */
function component(id: string): string {
  return id.toLowerCase().replace(/_+/g, '_')
}

/** `<registry>/<namespace>/<org>/<pack name>` for a pack. */
export function packRepository(settings: RegistrySettings, orgId: string, name: string): ImageRef {
  const push = settings.push!
  const repository = [push.namespace, component(orgId), component(name)].filter(Boolean).join('/')
  return { registry: push.registry, repository }
}

/**
 * Who may pull what from the push registry's namespace. Pulls there use serve's push credentials
 * (CORRAL_REGISTRY_AUTH_FILE), which reach every org's images — private and deleted packs too —
 * so the reference alone must not decide: `canSee` says whether a reference by digest is the
 * image_ref of a pack the caller can see (its own or a community pack).
 */
export interface PullAccess {
  orgId: string
  canSee(ref: ImageRef): Promise<boolean>
}

/**
 * Refuses (RegistryError `not_allowed`) a reference into the push registry's namespace unless it
 * is under the caller's own org (`<namespace>/<org id>/…`, as pushes spell it) or is, by digest,
 * the image_ref of a pack the caller can see. References elsewhere pass (checkAllowed decides).
 */
export async function checkPullAccess(settings: RegistrySettings, ref: ImageRef, access: PullAccess): Promise<void> {
  const push = settings.push
  if (!push || ref.registry !== push.registry) return
  const prefix = push.namespace ? `${push.namespace}/` : ''
  if (!ref.repository.startsWith(prefix)) return
  const owner = ref.repository.slice(prefix.length).split('/')[0]
  if (owner === component(access.orgId)) return
  if (ref.digest !== undefined && (await access.canSee(ref))) return
  throw new RegistryError('not_allowed', `${formatImageRef(ref)} belongs to another organisation's pack images on ${push.registry}${prefix ? `/${push.namespace}` : ''}; name an image under your own organisation or the image_ref of a pack you can see`)
}

/** Whether two references name the same image by digest (registry, repository and digest equal; tags ignored). */
export function sameImage(a: ImageRef, b: ImageRef): boolean {
  return a.digest !== undefined && a.registry === b.registry && a.repository === b.repository && a.digest === b.digest
}

/** The tag for a pack version: characters a tag cannot hold become `-` (e.g. `1.0+build` → `1.0-build`). */
export function versionTag(version: string): string {
  const tag = version.replace(/[^A-Za-z0-9_.-]/g, '-').replace(/^[.-]+/, '').slice(0, 128)
  return tag === '' ? 'latest' : tag
}

/**
 * Pushes a stored pack tree as `<registry>/<namespace>/<org>/<name>:<version>` and resolves with
 * the reference by digest (`…@sha256:<manifest digest>`), the pack's `image_ref`.
 */
export async function pushPackImage(settings: RegistrySettings, content: PackContent, target: PushTarget): Promise<string> {
  if (!settings.push) throw new Error('no push registry configured (CORRAL_PACK_REGISTRY)')
  const ref = packRepository(settings, target.orgId, target.name)
  const client = settings.client
  let size = 0
  for await (const chunk of content.tar(target.digest)) size += (chunk as Buffer).length
  const layer: Descriptor = { mediaType: LAYER_TAR, digest: target.digest, size }
  await client.pushBlob(ref, layer, () => content.tar(target.digest))
  const config = Buffer.from(JSON.stringify({
    architecture: 'amd64',
    os: 'linux',
    config: { Labels: { 'org.opencontainers.image.title': target.name, 'org.opencontainers.image.version': target.version } },
    rootfs: { type: 'layers', diff_ids: [target.digest] },
  }))
  const configDesc: Descriptor = { mediaType: OCI_CONFIG, digest: sha256(config), size: config.length }
  await client.pushBlob(ref, configDesc, bufferBody(config))
  const manifest = Buffer.from(JSON.stringify({
    schemaVersion: 2,
    mediaType: OCI_MANIFEST,
    config: configDesc,
    layers: [layer],
    annotations: { 'org.opencontainers.image.title': target.name, 'org.opencontainers.image.version': target.version },
  }))
  const digest = await client.putManifest(ref, versionTag(target.version), manifest, OCI_MANIFEST)
  return formatImageRef({ ...ref, digest })
}

export interface PulledPack {
  ingested: IngestedPack
  /** The reference as normalised (`host/repo:tag`, `host/repo@digest` or both). */
  imageRef: string
}

/**
 * Pulls `refText` and ingests the flattened image into the content store (pinned: call
 * `ingested.release()`). Requests on behalf of an org pass `access` (checkPullAccess). Throws RegistryError for reference, access and transport problems, and
 * the archive reader's CorralErrors (`validation_error` on image_ref) for the content.
 */
export async function pullPackImage(settings: RegistrySettings, content: PackContent, refText: string, access?: PullAccess): Promise<PulledPack> {
  const ref = parseImageRef(refText)
  checkAllowed(settings, ref)
  if (access) await checkPullAccess(settings, ref, access)
  const { manifest } = await settings.client.getManifest(ref)
  const at = formatImageRef(ref)
  if (manifest.layers.length > MAX_LAYERS) throw new RegistryError('invalid', `${at}: the image has ${manifest.layers.length} layers (at most ${MAX_LAYERS})`)
  const limits = content.limits
  // Layer tars carry headers and padding besides file bytes; replaced files count in every layer.
  const maxBytes = limits.maxUncompressedBytes + (limits.maxEntries + 2) * 3 * 1024 + 1024 * 1024
  let total = 0
  for (const layer of manifest.layers) {
    if (!PULLABLE_LAYERS.has(layer.mediaType)) throw new RegistryError('invalid', `${at}: layer media type ${layer.mediaType} is not supported (tar or tar+gzip layers only)`)
    total += layer.size
  }
  if (total > maxBytes) throw new RegistryError('invalid', `${at}: the image's layers total ${total} bytes (at most ${maxBytes})`)
  await mkdir(content.root, { recursive: true, mode: 0o755 })
  // Named like the store's ingests, so a crash's leftovers are swept at the next start.
  const scratch = await mkdtemp(join(content.root, '.ingest-pull-'))
  try {
    const files: string[] = []
    for (const [i, layer] of manifest.layers.entries()) {
      const file = join(scratch, `layer-${i}`)
      await pipeline(await settings.client.fetchBlob(ref, layer), createWriteStream(file, { flags: 'wx', mode: 0o600 }))
      files.push(file)
    }
    const tar = await flattenLayers(files, { maxEntries: limits.maxEntries * 4, maxTarBytes: maxBytes })
    const ingested = await content.ingest(tar, { plain: true }).catch((err: unknown) => {
      tar.destroy()
      throw asImageRefusal(err)
    })
    return { ingested, imageRef: at }
  } finally {
    await rm(scratch, { recursive: true, force: true })
  }
}

/** The archive reader words its refusals for uploads (`details.fields.archive`); here they concern the image. */
function asImageRefusal(err: unknown): unknown {
  const e = err as { code?: string; message?: string; details?: { fields?: Record<string, string> } }
  const why = e.details?.fields?.archive
  if (e.code === 'validation_error' && why !== undefined) {
    return apiError('validation_error', (e.message ?? '').replace('the pack archive', 'the image'), { fields: { image_ref: why } })
  }
  return err
}
