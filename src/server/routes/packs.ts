// Packs (spec "Pack", "Packs"): content bundles uploaded as tar.gz, stored content-addressed by
// src/packs/content.ts, recorded per org by store.packs. Own packs and every org's `community`
// packs are readable and attachable; only the owning org writes, re-uploads or deletes a pack
// (another org clones it instead). Registry-origin packs (`POST /v1/packs` with an image
// reference) are pulled through src/packs/registry-image.ts; with CORRAL_PACK_REGISTRY set,
// uploads, re-uploads and clones push the pack's image and record its `image_ref`.
// Decisions: docs/packs.md.
import multipart, { type Multipart } from '@fastify/multipart'
import { finished } from 'node:stream/promises'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { type EventType, CorralError, apiError, notFound } from '../../contract/index.js'
import type { IngestedPack, PackContent } from '../../packs/content.js'
import { RegistryError, parseImageRef, registrySettingsFromEnv, type ImageRef, type RegistrySettings } from '../../packs/registry.js'
import { pullPackImage, pushPackImage, sameImage, type PullAccess } from '../../packs/registry-image.js'
import '../../packs/service.js'
import { PACK_VISIBILITIES, type PackRecord, type PackVisibility, type StoreTransaction } from '../../store/index.js'
import type { PackManifest } from '../../packs/manifest.js'
import type { PackPatch } from '../../store/repositories/packs.js'
import { discard, dropRest, feedFilePart, isMalformedBody, type FileFeed } from '../multipart-file.js'
import { dateTime, idParams, statusOnly } from '../schemas/common.js'
import type { ServerDeps } from '../types.js'
import { ANY_MEMBER, CAPS_WRITE, NAME_SCHEMA, duplicateName, emitConfigEvent, fieldError, restartIdleWorkspaces } from './providers.js'

const packSchema = {
  type: 'object',
  required: ['id', 'name', 'display_name', 'version', 'tier', 'visibility', 'owned'],
  properties: {
    id: { type: 'string' },
    org_id: { type: 'string' },
    name: { type: 'string' },
    display_name: { type: 'string' },
    description: { type: 'string' },
    version: { type: 'string' },
    tier: { type: 'string' },
    visibility: { type: 'string' },
    category: { type: 'string' },
    capabilities: { type: 'string' },
    suggested_packs: { type: 'string' },
    image_origin: { type: 'string' },
    image_ref: { type: 'string' },
    image_digest: { type: 'string' },
    size_bytes: { type: 'integer' },
    created_at: dateTime,
    updated_at: dateTime,
    owned: { type: 'boolean' },
  },
} as const

const listQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    owned: { type: 'string', enum: ['true', 'false'] },
    name: NAME_SCHEMA,
    category: { type: 'string', minLength: 1, maxLength: 100 },
  },
} as const

const putBody = {
  type: 'object',
  minProperties: 1,
  additionalProperties: false,
  properties: {
    display_name: { type: 'string', minLength: 1, maxLength: 200 },
    description: { type: ['string', 'null'], maxLength: 2000 },
    category: { type: ['string', 'null'], minLength: 1, maxLength: 100 },
    suggested_packs: { type: ['string', 'null'], maxLength: 2000 },
    visibility: { type: 'string', enum: PACK_VISIBILITIES },
    image_ref: { type: 'string', minLength: 1, maxLength: 1024 },
  },
} as const

interface PutBody {
  display_name?: string
  description?: string | null
  category?: string | null
  suggested_packs?: string | null
  visibility?: PackVisibility
  image_ref?: string
}

const createBody = {
  type: 'object',
  required: ['image_ref'],
  additionalProperties: false,
  properties: {
    image_ref: { type: 'string', minLength: 1, maxLength: 1024 },
    visibility: { type: 'string', enum: PACK_VISIBILITIES },
  },
} as const

const cloneBody = { type: ['object', 'null'], additionalProperties: false, properties: { name: NAME_SCHEMA } } as const

/** The spec's Pack object: `owned` for the caller, and `org_id` only on the caller's own packs. */
export function packView(pack: PackRecord, orgId: string): Record<string, unknown> {
  const { manifest: _manifest, created_by: _createdBy, org_id, ...rest } = pack
  const owned = org_id === orgId
  return { ...rest, ...(owned ? { org_id } : {}), owned }
}

export async function packRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  const { store } = deps
  await app.register(multipart)

  app.post<{ Body: { image_ref: string; visibility?: PackVisibility } }>(
    '/packs',
    { config: { permission: CAPS_WRITE }, schema: { body: createBody, response: { 201: packSchema } } },
    async (request, reply) => {
      const p = request.principal!
      const content = contentStore(deps)
      const { ingested, imageRef } = await pullPackImage(registrySettings(deps), content, request.body.image_ref, pullAccess(deps, p.org.id)).catch(pullFailure)
      reply.code(201)
      return createPack(deps, request, content, ingested, { visibility: request.body.visibility, image_origin: 'image_ref', image_ref: imageRef })
    },
  )

  app.post(
    '/packs/upload',
    { config: { permission: CAPS_WRITE }, schema: { response: { 201: packSchema } } },
    async (request, reply) => {
      const content = await beforeUpload(request, reply, deps.packContent, async (c) => c)
      const { ingested, visibility } = await readUpload(deps, request, content, { visibility: true })
      reply.code(201)
      return createPack(deps, request, content, ingested, { visibility, image_origin: 'upload' })
    },
  )

  app.put<{ Params: { id: string } }>(
    '/packs/:id/upload',
    { config: { permission: CAPS_WRITE }, schema: { params: idParams, response: { 200: packSchema } } },
    async (request, reply) => {
      const orgId = request.principal!.org.id
      const { content, current } = await beforeUpload(request, reply, deps.packContent, async (c) => {
        const pack = await ownedPack(deps, orgId, request.params.id)
        if (pack.image_origin !== 'upload') {
          throw apiError('pack_not_reuploadable', `pack ${pack.name} was not created by upload (origin ${pack.image_origin}); only uploaded packs take a new archive`, { image_origin: pack.image_origin })
        }
        return { content: c, current: pack }
      })
      const { ingested } = await readUpload(deps, request, content, { visibility: false })
      let pack: PackRecord
      let replaced: string | undefined
      try {
        if (ingested.manifest.name !== current.name) {
          throw fieldError('name', `pack.yaml names ${ingested.manifest.name}, but this pack is ${current.name}`)
        }
        // Checked before the push too, so a refused agent does not move the version tag for nothing.
        await checkAgentChange(store, orgId, current, ingested.manifest)
        // Without a push registry the old image_ref (if one was pushed before) no longer matches the content.
        const imageRef = await pushImage(deps, content, orgId, current.name, ingested.manifest.version, ingested.digest)
        const done = await replaceContent(deps, orgId, current.id, { ...manifestFields(ingested), image_ref: imageRef ?? null })
        pack = done.pack
        replaced = done.replaced
      } catch (err) {
        ingested.release()
        await collect(deps, content, ingested.digest)
        throw err
      } finally {
        ingested.release()
      }
      if (replaced && replaced !== pack.image_digest) await collect(deps, content, replaced)
      await emitPackEvent(deps, request, 'content_pack_updated', pack, { image_ref: pack.image_ref ?? '', kind: 'reupload' })
      // Workspaces of every role attaching the pack (community packs: other orgs' too) respawn to mount the new content.
      await restartAttaching(deps, request, pack.id)
      return packView(pack, orgId)
    },
  )

  app.get<{ Querystring: { owned?: 'true' | 'false'; name?: string; category?: string } }>(
    '/packs',
    {
      config: { permission: ANY_MEMBER },
      schema: { querystring: listQuery, response: { 200: { type: 'object', required: ['packs'], properties: { packs: { type: 'array', items: packSchema } } } } },
    },
    async (request) => {
      const orgId = request.principal!.org.id
      const { owned, name, category } = request.query
      const packs = await store.packs.list(orgId, { owned: owned === 'true', ...(name ? { name } : {}), ...(category ? { category } : {}) })
      return { packs: packs.filter((pk) => owned !== 'false' || pk.org_id !== orgId).map((pk) => packView(pk, orgId)) }
    },
  )

  app.get<{ Params: { id: string } }>(
    '/packs/:id',
    { config: { permission: ANY_MEMBER }, schema: { params: idParams, response: { 200: packSchema } } },
    async (request) => {
      const orgId = request.principal!.org.id
      return packView((await store.packs.get(orgId, request.params.id)) ?? throwNotFound(), orgId)
    },
  )

  app.put<{ Params: { id: string }; Body: PutBody }>(
    '/packs/:id',
    { config: { permission: CAPS_WRITE }, schema: { params: idParams, body: putBody, response: { 200: packSchema } } },
    async (request) => {
      const orgId = request.principal!.org.id
      const body = request.body
      const current = await ownedPack(deps, orgId, request.params.id)
      if (body.image_ref !== undefined && current.image_origin !== 'image_ref') {
        throw fieldError('image_ref', `applies to registry-origin packs only (this pack's origin is ${current.image_origin})`)
      }
      const patch: PackPatch = { ...body }
      if (body.description === '') patch.description = null
      if (body.suggested_packs !== undefined && body.suggested_packs !== null) patch.suggested_packs = normaliseSuggested(body.suggested_packs)
      const flipsVisibility = body.visibility !== undefined && body.visibility !== current.visibility
      if (flipsVisibility && body.visibility === 'org') {
        // Roles of other orgs would lose sight of a pack they attach: refuse, as delete does.
        const others = (await store.packs.rolesAttaching(current.id)).filter((r) => r.org_id !== orgId)
        if (others.length > 0) {
          throw apiError('pack_in_use', `pack ${current.name} is attached by ${others.length} agent role(s) of other organisations; it must stay community`, { other_org_roles: others.length })
        }
      }
      if (body.image_ref === undefined) {
        const pack = (await store.packs.update(orgId, current.id, patch)) ?? throwNotFound()
        await emitPackEvent(deps, request, 'content_pack_updated', pack, { image_ref: pack.image_ref ?? '', kind: flipsVisibility ? 'visibility' : 'metadata', patched_fields: Object.keys(body).sort() })
        return packView(pack, orgId)
      }
      // A new image: pulled and ingested like POST /v1/packs; the image's pack.yaml replaces the
      // manifest fields (as a re-upload does), then the body's own label fields apply on top.
      const content = contentStore(deps)
      const { ingested, imageRef } = await pullPackImage(registrySettings(deps), content, body.image_ref, pullAccess(deps, orgId)).catch(pullFailure)
      let pack: PackRecord
      let replaced: string | undefined
      try {
        if (ingested.manifest.name !== current.name) {
          throw fieldError('image_ref', `the image's pack.yaml names ${ingested.manifest.name}, but this pack is ${current.name}`)
        }
        const done = await replaceContent(deps, orgId, current.id, { ...manifestFields(ingested), ...patch, image_ref: imageRef })
        pack = done.pack
        replaced = done.replaced
      } catch (err) {
        ingested.release()
        await collect(deps, content, ingested.digest)
        throw err
      } finally {
        ingested.release()
      }
      if (replaced && replaced !== pack.image_digest) await collect(deps, content, replaced)
      await emitPackEvent(deps, request, 'content_pack_updated', pack, { image_ref: pack.image_ref ?? '', kind: 'image_ref', patched_fields: Object.keys(body).sort() })
      await restartAttaching(deps, request, pack.id)
      return packView(pack, orgId)
    },
  )

  app.delete<{ Params: { id: string } }>(
    '/packs/:id',
    { config: { permission: CAPS_WRITE }, schema: { params: idParams, response: { 200: statusOnly('deleted') } } },
    async (request) => {
      const orgId = request.principal!.org.id
      const current = await ownedPack(deps, orgId, request.params.id)
      // The in-use cascade guard (spec): a non-archived role anywhere still attaching it pins it.
      const attaching = await store.packs.rolesAttaching(current.id)
      if (attaching.length > 0) {
        const own = attaching.filter((r) => r.org_id === orgId).map((r) => r.role_id)
        throw apiError('pack_in_use', `pack ${current.name} is attached by ${attaching.length} agent role(s); detach it first`, {
          roles: own,
          other_org_roles: attaching.length - own.length,
        })
      }
      const deleted = (await store.packs.delete(orgId, current.id)) ?? throwNotFound()
      if (deleted.image_digest && deps.packContent) await collect(deps, deps.packContent, deleted.image_digest)
      await emitPackEvent(deps, request, 'content_pack_deleted', deleted)
      return { status: 'deleted' }
    },
  )

  app.post<{ Params: { id: string }; Body: { name?: string } | null | undefined }>(
    '/packs/:id/clone',
    { config: { permission: CAPS_WRITE }, schema: { params: idParams, body: cloneBody, response: { 201: packSchema } } },
    async (request, reply) => {
      const p = request.principal!
      const source = (await store.packs.get(p.org.id, request.params.id)) ?? throwNotFound()
      const name = request.body?.name ?? source.name
      // Content is addressed by digest, so the copy shares the tree and survives the source's deletion.
      const unpin = source.image_digest && deps.packContent ? deps.packContent.pin(source.image_digest) : () => {}
      try {
        if (await store.packs.getByName(p.org.id, name)) throw nameTaken(name)
        // Rebuilt under the caller's namespace (spec), so the copy's image outlives the source's.
        const pushed = source.image_digest && deps.packContent && (await deps.packContent.has(source.image_digest))
          ? await pushImage(deps, deps.packContent, p.org.id, name, source.version, source.image_digest)
          : undefined
        const pack = await store
          .transaction(async (tx) => {
            if (await tx.packs.getByName(p.org.id, name)) throw nameTaken(name)
            return tx.packs.create(p.org.id, {
              name,
              display_name: source.display_name,
              description: source.description ?? null,
              version: source.version,
              tier: 'community',
              visibility: 'org',
              category: source.category ?? null,
              capabilities: source.capabilities ?? null,
              suggested_packs: source.suggested_packs ?? null,
              image_origin: 'clone',
              image_ref: pushed ?? source.image_ref ?? null,
              image_digest: source.image_digest ?? null,
              size_bytes: source.size_bytes ?? null,
              manifest: source.manifest,
              created_by: p.userId,
            })
          })
          .catch(duplicateName(name, 'pack'))
        await emitPackEvent(deps, request, 'content_pack_cloned', pack, { source_pack_id: source.id, source_name: source.name })
        reply.code(201)
        return packView(pack, p.org.id)
      } finally {
        unpin()
      }
    },
  )
}

/**
 * A role's `pack_ids` (create and patch): every id is a pack the org can see, and at most one of
 * them provides the agent command, and no two share a name (docs/packs.md). Validation errors
 * name the field `pack_ids`.
 */
export async function checkPackIds(tx: StoreTransaction, orgId: string, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return
  const found = await tx.packs.findVisible(orgId, ids)
  const known = new Set(found.map((pk) => pk.id))
  const unknown = ids.filter((id) => !known.has(id))
  if (unknown.length > 0) throw fieldError('pack_ids', `has unknown packs: ${unknown.join(', ')}`)
  // Each pack is mounted at /packs/<name>: two packs of one name (own and community) would collide.
  const names = found.map((pk) => pk.name)
  const twice = names.find((name, i) => names.indexOf(name) !== i)
  if (twice !== undefined) throw fieldError('pack_ids', `attaches two packs named ${twice}; clone one under another name`)
  const agents = found.filter((pk) => pk.manifest.agent)
  if (agents.length > 1) throw fieldError('pack_ids', `may attach at most one pack that provides an agent (${agents.map((pk) => pk.name).join(', ')} do)`)
}

/**
 * Replaces a pack's content (re-upload, PUT image_ref) in one transaction that first touches the
 * row — taking its lock on Postgres; SQLite transactions run one at a time — so the digest read
 * is the one this update replaces, even when two replacements race (each then collects what it
 * replaced, and no tree is left behind). The agent rule is checked again inside, against the
 * row as it is now.
 */
async function replaceContent(deps: ServerDeps, orgId: string, packId: string, patch: PackPatch & { manifest: PackManifest }): Promise<{ pack: PackRecord; replaced?: string }> {
  return deps.store.transaction(async (tx) => {
    const before = (await tx.packs.update(orgId, packId, {})) ?? throwNotFound()
    await checkAgentChange(tx, orgId, before, patch.manifest)
    const pack = (await tx.packs.update(orgId, packId, patch)) ?? throwNotFound()
    return { pack, ...(before.image_digest ? { replaced: before.image_digest } : {}) }
  })
}

/**
 * New content that makes a pack provide an agent it did not provide before (docs/packs.md
 * "Packs that provide the agent"): refused (409 `pack_in_use`) while a non-archived role of
 * another org attaches the pack — it would run as their agent, with their tokens — and, for the
 * org's own roles, when a role attaching it already has another agent pack (the rule
 * checkPackIds applies to pack_ids). Changing or removing an existing agent is not restricted.
 */
async function checkAgentChange(repos: Pick<StoreTransaction, 'packs' | 'agentRoles'>, orgId: string, current: PackRecord, next: PackManifest): Promise<void> {
  if (!next.agent || current.manifest.agent) return
  const attaching = await repos.packs.rolesAttaching(current.id)
  const others = attaching.filter((r) => r.org_id !== orgId).length
  if (others > 0) {
    throw apiError('pack_in_use', `pack ${current.name} is attached by ${others} agent role(s) of other organisations; it cannot start providing an agent while they attach it`, { other_org_roles: others })
  }
  const clashing: string[] = []
  for (const { role_id } of attaching) {
    const role = await repos.agentRoles.get(orgId, role_id)
    if (!role) continue
    const agents = (await repos.packs.findVisible(orgId, role.pack_ids)).filter((pk) => (pk.id === current.id ? next.agent : pk.manifest.agent))
    if (agents.length > 1) clashing.push(role_id)
  }
  if (clashing.length > 0) {
    throw apiError('pack_in_use', `pack ${current.name} would give ${clashing.length} agent role(s) a second agent pack; detach one first`, { roles: clashing })
  }
}

/**
 * Runs an upload route's checks before the body is read (content store present, the target pack
 * writable). On a refusal the body is read and dropped first when it is within the upload limit,
 * so the client — still sending — receives the envelope rather than a reset connection; a larger
 * or unsized body is not read and the connection closes after the answer.
 */
async function beforeUpload<T>(request: FastifyRequest, reply: FastifyReply, content: PackContent | undefined, check: (content: PackContent) => Promise<T>): Promise<T> {
  try {
    if (!content) throw apiError('service_unavailable', 'pack uploads are not available: this server has no pack content store')
    return await check(content)
  } catch (err) {
    const length = Number(request.headers['content-length'])
    const max = (content?.limits.maxCompressedBytes ?? 0) + 64 * 1024
    if (Number.isFinite(length) && length <= max && !request.raw.readableEnded) {
      request.raw.resume()
      await finished(request.raw).catch(() => {})
    } else {
      reply.header('connection', 'close')
    }
    throw err
  }
}

/** The caller's own pack; a visible community pack of another org is a permission error (clone it instead). */
async function ownedPack(deps: ServerDeps, orgId: string, id: string): Promise<PackRecord> {
  const pack = (await deps.store.packs.get(orgId, id)) ?? throwNotFound()
  if (pack.org_id !== orgId) throw apiError('permission_denied', `pack ${pack.name} belongs to another organisation; clone it to change it`)
  return pack
}

/** The record fields a pack.yaml and its content determine (create and re-upload). */
function manifestFields(ingested: IngestedPack) {
  const m = ingested.manifest
  return {
    display_name: m.display_name,
    description: m.description ?? null,
    version: m.version,
    category: m.category ?? null,
    capabilities: ingested.capabilities ?? null,
    suggested_packs: m.suggested_packs ?? null,
    image_digest: ingested.digest,
    size_bytes: ingested.sizeBytes,
    manifest: m,
  }
}

/**
 * Reads the multipart body: one `archive` file part (streamed straight into the content store)
 * and, on create, an optional `visibility` field. Anything else is a validation error.
 *
 * The parts are read while the archive is being ingested, so the end of the body is seen even
 * when the archive part never ends: a body cut off mid-part (or a client that disconnects) fails
 * the ingest instead of stalling it. After a refusal the rest of the body is still read and
 * dropped, so the client — still sending — gets the envelope instead of a reset connection. An
 * over-limit archive is answered (413) as soon as it passes the limit, and the rest of the body
 * is dropped after the answer: closing the connection instead would reset it under a client
 * still sending, which can lose the answer (as for task uploads, routes/task-input.ts).
 */
/**
 * Records a new pack from ingested content (upload or image pull). An upload's image is pushed
 * first when a push registry is configured (its name checked before, so a taken name leaves no
 * image behind for nothing); the name is checked again in the transaction that creates the row,
 * `content_pack_created` is emitted, and on any failure the ingested tree is released and
 * collected so nothing is left behind.
 */
async function createPack(
  deps: ServerDeps,
  request: FastifyRequest,
  content: PackContent,
  ingested: IngestedPack,
  origin: { visibility: PackVisibility | undefined; image_origin: 'upload' | 'image_ref'; image_ref?: string },
): Promise<Record<string, unknown>> {
  const p = request.principal!
  const m = ingested.manifest
  try {
    let imageRef = origin.image_ref
    if (origin.image_origin === 'upload') {
      if (await deps.store.packs.getByName(p.org.id, m.name)) throw nameTaken(m.name)
      imageRef = await pushImage(deps, content, p.org.id, m.name, m.version, ingested.digest)
    }
    const pack = await deps.store
      .transaction(async (tx) => {
        if (await tx.packs.getByName(p.org.id, m.name)) throw nameTaken(m.name)
        return tx.packs.create(p.org.id, {
          ...manifestFields(ingested),
          name: m.name,
          tier: 'community',
          visibility: origin.visibility ?? 'org',
          image_origin: origin.image_origin,
          ...(imageRef ? { image_ref: imageRef } : {}),
          created_by: p.userId,
        })
      })
      .catch(duplicateName(m.name, 'pack'))
    await emitPackEvent(deps, request, 'content_pack_created', pack, {
      display_name: pack.display_name, visibility: pack.visibility, tier: pack.tier, image_origin: pack.image_origin,
    })
    return packView(pack, p.org.id)
  } catch (err) {
    ingested.release()
    await collect(deps, content, ingested.digest)
    throw err
  } finally {
    ingested.release()
  }
}

async function readUpload(deps: ServerDeps, request: FastifyRequest, content: PackContent, opts: { visibility: boolean }): Promise<{ ingested: IngestedPack; visibility?: PackVisibility }> {
  if (!request.isMultipart()) throw apiError('unsupported_media_type', 'send multipart/form-data with the pack as an `archive` file part')
  const tooLarge = () => apiError('payload_too_large', `the pack archive is larger than ${content.limits.maxCompressedBytes} bytes (CORRAL_PACK_MAX_BYTES)`)
  let ingested: IngestedPack | undefined
  let ingestion: Promise<void> | undefined
  let archive: FileFeed | undefined
  let visibility: PackVisibility | undefined
  let failure: unknown
  let stop!: (err: unknown) => void
  const stopped = new Promise<never>((_resolve, reject) => (stop = reject))
  stopped.catch(() => {})

  // A little slack over the limit so the archive reader's own limit error fires first.
  const parts = request.parts({ limits: { files: 1, fields: 4, fieldSize: 1024, fileSize: content.limits.maxCompressedBytes + 64 * 1024 } })[Symbol.asyncIterator]()
  // The step being waited for when an over-limit archive stops the loop: the drain takes it first.
  let next: Promise<IteratorResult<Multipart>> | undefined
  try {
    for (;;) {
      next = parts.next()
      const step = await Promise.race([next, stopped])
      next = undefined
      if (step.done) break
      const part = step.value
      if (failure !== undefined) {
        if (part.type === 'file') discard(part.file)
        continue
      }
      try {
        if (part.type === 'file') {
          if (part.fieldname !== 'archive') throw fieldError(part.fieldname, 'is not a known part (send the pack as `archive`)')
          // Fed through the helper's own stream: a body cut short or a client gone fails the ingest.
          const file = part.file
          const feed = feedFilePart(file, cutShort)
          archive = feed
          ingestion = content.ingest(feed.stream).then(
            (result) => {
              ingested = result
              if (part.file.truncated) {
                failure ??= tooLarge()
                stop(failure)
              }
            },
            (err: unknown) => {
              failure ??= err
              // The part's remaining bytes flow to nowhere, so the body can be read to its end.
              feed.drop()
              if (isTooLarge(err)) stop(err)
            },
          )
        } else if (part.fieldname === 'visibility' && opts.visibility) {
          const v = String(part.value)
          if (!(PACK_VISIBILITIES as readonly string[]).includes(v)) throw fieldError('visibility', `must be one of ${PACK_VISIBILITIES.join(', ')}`)
          visibility = v as PackVisibility
        } else {
          throw fieldError(part.fieldname, 'is not a known field')
        }
      } catch (err) {
        failure ??= err
        if (part.type === 'file') discard(part.file)
      }
    }
  } catch (err) {
    failure ??= err
    // Stopped at an over-limit archive: the rest of the body is dropped after the answer.
    if (isTooLarge(err)) void dropRest(parts, next)
  }
  // The body has been read to its end (or we stopped reading): an archive part that has not
  // ended by now never will.
  archive?.bodyOver()
  await ingestion
  if (failure === undefined && !ingested) failure = fieldError('archive', 'is required (a tar.gz file part)')
  if (failure === undefined) return { ingested: ingested!, ...(visibility ? { visibility } : {}) }
  if (ingested) {
    ingested.release()
    await collect(deps, content, ingested.digest)
  }
  const code = (failure as { code?: string }).code
  if (isTooLarge(failure)) throw tooLarge()
  if (code === 'FST_FILES_LIMIT') throw fieldError('archive', 'send exactly one archive')
  if (code === 'FST_FIELDS_LIMIT' || code === 'FST_PARTS_LIMIT') throw fieldError('body', 'has too many parts')
  if (failure instanceof CorralError) throw failure
  // Anything else the multipart parser raises is a malformed body, not a server fault; I/O errors
  // of the content store are CorralErrors or pass through the ingest as themselves.
  if (isMalformedBody(failure)) {
    throw fieldError('body', `is not valid multipart/form-data (${(failure as Error).message})`)
  }
  throw failure
}

/** Reads the remaining parts (after `pending`, a step already asked for) to the end of the body, dropping them. */
function cutShort() {
  return apiError('validation_error', 'the upload ended in the middle of the archive part', { fields: { archive: 'ended before its end (truncated upload)' } })
}

function isTooLarge(err: unknown): boolean {
  const code = (err as { code?: string }).code
  return code === 'payload_too_large' || code === 'FST_REQ_FILE_TOO_LARGE'
}

function contentStore(deps: ServerDeps): PackContent {
  if (!deps.packContent) throw apiError('service_unavailable', 'registry packs are not available: this server has no pack content store')
  return deps.packContent
}

/** Without settings (an app built without the packs service), no registry is allowed and nothing is pushed. */
const NO_REGISTRY = registrySettingsFromEnv({})

function registrySettings(deps: ServerDeps): RegistrySettings {
  return deps.packRegistry ?? NO_REGISTRY
}

/** Pulls for `orgId`: into the push registry's namespace, only its own images or image_refs of packs it can see. */
function pullAccess(deps: ServerDeps, orgId: string): PullAccess {
  return {
    orgId,
    async canSee(ref: ImageRef) {
      return (await deps.store.packs.list(orgId)).some((pk) => pk.image_ref !== undefined && sameImage(parseStored(pk.image_ref), ref))
    },
  }
}

function parseStored(imageRef: string): ImageRef {
  try {
    return parseImageRef(imageRef)
  } catch {
    return { registry: '', repository: '' }
  }
}

/** A pull's RegistryError as the API answers it: unreachable → 502, anything about the image → 400 on image_ref. */
function pullFailure(err: unknown): never {
  if (!(err instanceof RegistryError)) throw err
  if (err.kind === 'unreachable') throw apiError('registry_unavailable', err.message)
  throw apiError('validation_error', err.message, { fields: { image_ref: err.message } })
}

/**
 * Pushes the pack's image when a push registry is configured (CORRAL_PACK_REGISTRY) and resolves
 * with its reference by digest; without one, undefined. Any push failure is the registry's
 * (the content is already checked): 502 `registry_unavailable`.
 */
async function pushImage(deps: ServerDeps, content: PackContent, orgId: string, name: string, version: string, digest: string): Promise<string | undefined> {
  const settings = deps.packRegistry
  if (!settings?.push) return undefined
  try {
    return await pushPackImage(settings, content, { orgId, name, version, digest })
  } catch (err) {
    if (!(err instanceof RegistryError)) throw err
    deps.logger.warn({ registry: settings.push.registry, kind: err.kind, message: err.message }, 'pushing a pack image failed')
    throw apiError('registry_unavailable', `pushing the pack image failed: ${err.message}`)
  }
}

/** Removes a content tree once no pack row references it; failures are logged, never the request's. */
async function collect(deps: ServerDeps, content: PackContent, digest: string): Promise<void> {
  try {
    await content.removeIfUnused(digest, () => deps.store.packs.digestInUse(digest))
  } catch (err) {
    deps.logger.warn({ err, digest }, 'removing unused pack content failed')
  }
}

async function restartAttaching(deps: ServerDeps, request: FastifyRequest, packId: string): Promise<void> {
  const byOrg = new Map<string, string[]>()
  for (const r of await deps.store.packs.rolesAttaching(packId)) byOrg.set(r.org_id, [...(byOrg.get(r.org_id) ?? []), r.role_id])
  for (const [orgId, roleIds] of byOrg) await restartIdleWorkspaces(deps, request, orgId, roleIds)
}

function normaliseSuggested(value: string): string | null {
  const names = value.split(',').map((s) => s.trim()).filter((s) => s !== '')
  const bad = names.find((n) => !new RegExp(NAME_SCHEMA.pattern).test(n))
  if (bad !== undefined) throw fieldError('suggested_packs', `"${bad}" is not a pack name`)
  return names.length > 0 ? [...new Set(names)].join(',') : null
}

function nameTaken(name: string) {
  return apiError('conflict', `a pack named ${name} already exists in this organisation`, { fields: { name: 'already exists' } })
}

function throwNotFound(): never {
  throw notFound('pack')
}

/** content_pack_* events (spec Events): resource_id, name and version, plus the type's own keys. */
function emitPackEvent(deps: ServerDeps, request: FastifyRequest, type: EventType, pack: PackRecord, extra: Record<string, unknown> = {}): Promise<void> {
  const base: Record<string, unknown> = { resource_id: pack.id, name: pack.name }
  if (type !== 'content_pack_cloned') base.version = pack.version
  return emitConfigEvent(deps, request, type, { ...base, ...extra })
}
