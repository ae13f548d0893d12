// The pack operations behind /v1/packs (spec "Pack", "Packs"): content bundles stored
// content-addressed by content.ts and recorded per org by store.packs. Own packs and every org's
// `community` packs are readable and attachable; only the owning org writes, re-uploads or deletes
// a pack (another org clones it instead). Registry-origin packs are pulled through
// registry-image.ts; with CORRAL_PACK_REGISTRY set, uploads, re-uploads and clones push the pack's
// image and record its `image_ref`. The HTTP side (schemas, multipart, the Pack view) is
// src/server/routes/packs.ts. Decisions: docs/packs.md.
import { auditedMutation } from '../audit/index.js'
import { apiError, notFound, type AuditSink, type EventType, type PackManifest } from '../contract/index.js'
import { isUniqueViolation, type PackPatch, type PackRecord, type PackVisibility, type Store, type StoreTransaction } from '../store/index.js'
import type { IngestedPack, PackContent } from './content.js'
import { NO_REGISTRY, pullAccess, pullFailure, pushImage, type PushLogger } from './pack-images.js'
import { checkAgentChange, fieldError, manifestFields, nameTaken, normaliseSuggested } from './pack-rules.js'
import type { RegistrySettings } from './registry-settings.js'
import { pullPackImage } from './registry-image.js'

/** Who acts: the org the pack belongs to (or is read from) and the user audit rows name. */
export interface PackActor {
  orgId: string
  userId: string
}

/**
 * What the service reads, at call time: the app's dependencies object can be handed in as is, and
 * a part filled in after the service was built (a test swapping the content store) is seen.
 */
export interface PackServiceDeps {
  readonly store: Store
  readonly audit: AuditSink
  readonly logger: PushLogger
  /** Extracted pack trees by digest; absent → uploads and registry packs answer 503. */
  readonly packContent?: PackContent | null
  /** Where pack images are pushed and pulled; absent → no registry is allowed. */
  readonly packRegistry?: RegistrySettings
  /** Respawns a role's idle workspaces after its packs' content changed; absent → no workspaces. */
  readonly workspaceControl?: { restartIdleForRole(orgId: string, roleId: string): Promise<number> } | null
}

export interface PackUpdate {
  display_name?: string
  description?: string | null
  category?: string | null
  suggested_packs?: string | null
  visibility?: PackVisibility
  image_ref?: string
}

export class PackService {
  readonly #deps: PackServiceDeps

  constructor(deps: PackServiceDeps) {
    this.#deps = deps
  }

  /** The content store for an upload; without one, 503. */
  uploadContent(): PackContent {
    const content = this.#deps.packContent
    if (!content) throw apiError('service_unavailable', 'pack uploads are not available: this server has no pack content store')
    return content
  }

  /** The content store for a registry pull; without one, 503. */
  #registryContent(): PackContent {
    const content = this.#deps.packContent
    if (!content) throw apiError('service_unavailable', 'registry packs are not available: this server has no pack content store')
    return content
  }

  get #registry(): RegistrySettings {
    return this.#deps.packRegistry ?? NO_REGISTRY
  }

  /** Visible packs; `owned: 'true'` only the org's own, `'false'` only other orgs' community packs. */
  async list(orgId: string, query: { owned?: 'true' | 'false'; name?: string; category?: string }): Promise<PackRecord[]> {
    const { owned, name, category } = query
    const packs = await this.#deps.store.packs.list(orgId, { owned: owned === 'true', ...(name ? { name } : {}), ...(category ? { category } : {}) })
    return packs.filter((pk) => owned !== 'false' || pk.org_id !== orgId)
  }

  async get(orgId: string, id: string): Promise<PackRecord> {
    return (await this.#deps.store.packs.get(orgId, id)) ?? throwNotFound()
  }

  /** The caller's own pack; a visible community pack of another org is a permission error (clone it instead). */
  async owned(orgId: string, id: string): Promise<PackRecord> {
    const pack = (await this.#deps.store.packs.get(orgId, id)) ?? throwNotFound()
    if (pack.org_id !== orgId) throw apiError('permission_denied', `pack ${pack.name} belongs to another organisation; clone it to change it`)
    return pack
  }

  /** The pack a re-upload replaces: the caller's own, created by upload. */
  async reuploadTarget(orgId: string, id: string): Promise<PackRecord> {
    const pack = await this.owned(orgId, id)
    if (pack.image_origin !== 'upload') {
      throw apiError('pack_not_reuploadable', `pack ${pack.name} was not created by upload (origin ${pack.image_origin}); only uploaded packs take a new archive`, { image_origin: pack.image_origin })
    }
    return pack
  }

  /** `POST /v1/packs`: the image is pulled and ingested, then recorded like an upload. */
  async createFromImage(actor: PackActor, body: { image_ref: string; visibility?: PackVisibility }): Promise<PackRecord> {
    const content = this.#registryContent()
    const { ingested, imageRef } = await pullPackImage(this.#registry, content, body.image_ref, pullAccess(this.#deps.store, actor.orgId)).catch(pullFailure)
    return this.create(actor, content, ingested, { visibility: body.visibility, image_origin: 'image_ref', image_ref: imageRef })
  }

  /**
   * Records a new pack from ingested content (upload or image pull). An upload's image is pushed
   * first when a push registry is configured (its name checked before, so a taken name leaves no
   * image behind for nothing); the name is checked again in the transaction that creates the row,
   * `content_pack_created` is emitted, and on any failure the ingested tree is released and
   * collected so nothing is left behind.
   */
  async create(
    actor: PackActor,
    content: PackContent,
    ingested: IngestedPack,
    origin: { visibility: PackVisibility | undefined; image_origin: 'upload' | 'image_ref'; image_ref?: string },
  ): Promise<PackRecord> {
    const { store } = this.#deps
    const m = ingested.manifest
    return this.#holding(content, ingested, async () => {
      let imageRef = origin.image_ref
      if (origin.image_origin === 'upload') {
        if (await store.packs.getByName(actor.orgId, m.name)) throw nameTaken(m.name)
        imageRef = await this.#push(content, actor.orgId, m.name, m.version, ingested.digest)
      }
      return this.#mutate(actor, async (tx, record) => {
        if (await tx.packs.getByName(actor.orgId, m.name)) throw nameTaken(m.name)
        const pack = await tx.packs.create(actor.orgId, {
          ...manifestFields(ingested),
          name: m.name,
          tier: 'community',
          visibility: origin.visibility ?? 'org',
          image_origin: origin.image_origin,
          ...(imageRef ? { image_ref: imageRef } : {}),
          created_by: actor.userId,
        })
        record('content_pack_created', pack, { display_name: pack.display_name, visibility: pack.visibility, tier: pack.tier, image_origin: pack.image_origin })
        return pack
      }).catch(duplicateName(m.name))
    })
  }

  /** `PUT /v1/packs/{id}/upload`: new content for an uploaded pack (from reuploadTarget) of the same name. */
  async reupload(actor: PackActor, current: PackRecord, content: PackContent, ingested: IngestedPack, change: Record<string, unknown> = { kind: 'reupload' }): Promise<PackRecord> {
    const { pack, replaced } = await this.#holding(content, ingested, async () => {
      if (ingested.manifest.name !== current.name) {
        throw fieldError('name', `pack.yaml names ${ingested.manifest.name}, but this pack is ${current.name}`)
      }
      // Checked before the push too, so a refused agent does not move the version tag for nothing.
      await checkAgentChange(this.#deps.store, actor.orgId, current, ingested.manifest)
      // Without a push registry the old image_ref (if one was pushed before) no longer matches the content.
      const imageRef = await this.#push(content, actor.orgId, current.name, ingested.manifest.version, ingested.digest)
      return this.#replaceContent(actor, current.id, { ...manifestFields(ingested), image_ref: imageRef ?? null }, change)
    })
    if (replaced && replaced !== pack.image_digest) await this.collect(content, replaced)
    // Workspaces of every role attaching the pack (community packs: other orgs' too) respawn to mount the new content.
    await this.#restartAttaching(pack.id)
    return pack
  }

  /** `PUT /v1/packs/{id}`: label fields and visibility; on registry-origin packs, a new image_ref too. */
  /**
   * `PUT /v1/packs/{id}/files/{path}`: one file of an uploaded pack replaced (or added), stored and
   * applied exactly as a re-upload of the edited tree (`content_pack_updated`, kind `file_edit`).
   */
  async editFile(actor: PackActor, id: string, path: string, data: Buffer): Promise<PackRecord> {
    const current = await this.reuploadTarget(actor.orgId, id)
    const content = this.uploadContent()
    if (!current.image_digest) throw apiError('pack_not_reuploadable', `pack ${current.name} has no stored content to edit`, { image_origin: current.image_origin })
    const ingested = await content.ingestEdit(current.image_digest, path, data)
    return this.reupload(actor, current, content, ingested, { kind: 'file_edit', edited: path.split('/').filter((p) => p !== '' && p !== '.').join('/') })
  }

  async update(actor: PackActor, id: string, body: PackUpdate): Promise<PackRecord> {
    const { store } = this.#deps
    const { orgId } = actor
    const current = await this.owned(orgId, id)
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
      return this.#mutate(actor, async (tx, record) => {
        const pack = (await tx.packs.update(orgId, current.id, patch)) ?? throwNotFound()
        record('content_pack_updated', pack, { image_ref: pack.image_ref ?? '', kind: flipsVisibility ? 'visibility' : 'metadata', patched_fields: Object.keys(body).sort() })
        return pack
      })
    }
    // A new image: pulled and ingested like POST /v1/packs; the image's pack.yaml replaces the
    // manifest fields (as a re-upload does), then the body's own label fields apply on top.
    const content = this.#registryContent()
    const { ingested, imageRef } = await pullPackImage(this.#registry, content, body.image_ref, pullAccess(store, orgId)).catch(pullFailure)
    const { pack, replaced } = await this.#holding(content, ingested, async () => {
      if (ingested.manifest.name !== current.name) {
        throw fieldError('image_ref', `the image's pack.yaml names ${ingested.manifest.name}, but this pack is ${current.name}`)
      }
      return this.#replaceContent(actor, current.id, { ...manifestFields(ingested), ...patch, image_ref: imageRef }, { kind: 'image_ref', patched_fields: Object.keys(body).sort() })
    })
    if (replaced && replaced !== pack.image_digest) await this.collect(content, replaced)
    await this.#restartAttaching(pack.id)
    return pack
  }

  /** `DELETE /v1/packs/{id}`: refused while any non-archived role anywhere attaches the pack. */
  async delete(actor: PackActor, id: string): Promise<void> {
    const { store } = this.#deps
    const { orgId } = actor
    const current = await this.owned(orgId, id)
    // The in-use cascade guard (spec): a non-archived role anywhere still attaching it pins it.
    const attaching = await store.packs.rolesAttaching(current.id)
    if (attaching.length > 0) {
      const own = attaching.filter((r) => r.org_id === orgId).map((r) => r.role_id)
      throw apiError('pack_in_use', `pack ${current.name} is attached by ${attaching.length} agent role(s); detach it first`, {
        roles: own,
        other_org_roles: attaching.length - own.length,
      })
    }
    const deleted = await this.#mutate(actor, async (tx, record) => {
      const deleted = (await tx.packs.delete(orgId, current.id)) ?? throwNotFound()
      record('content_pack_deleted', deleted)
      return deleted
    })
    const content = this.#deps.packContent
    if (deleted.image_digest && content) await this.collect(content, deleted.image_digest)
  }

  /** `POST /v1/packs/{id}/clone`: a copy owned by the caller's org, sharing the content tree. */
  async clone(actor: PackActor, id: string, newName?: string): Promise<PackRecord> {
    const { store } = this.#deps
    const { orgId } = actor
    const source = (await store.packs.get(orgId, id)) ?? throwNotFound()
    const name = newName ?? source.name
    const content = this.#deps.packContent
    // Content is addressed by digest, so the copy shares the tree and survives the source's deletion.
    const unpin = source.image_digest && content ? content.pin(source.image_digest) : () => {}
    try {
      if (await store.packs.getByName(orgId, name)) throw nameTaken(name)
      // Rebuilt under the caller's namespace (spec), so the copy's image outlives the source's.
      const pushed = source.image_digest && content && (await content.has(source.image_digest))
        ? await this.#push(content, orgId, name, source.version, source.image_digest)
        : undefined
      return await this.#mutate(actor, async (tx, record) => {
          if (await tx.packs.getByName(orgId, name)) throw nameTaken(name)
          const pack = await tx.packs.create(orgId, {
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
            created_by: actor.userId,
          })
          record('content_pack_cloned', pack, { source_pack_id: source.id, source_name: source.name })
          return pack
        }).catch(duplicateName(name))
    } finally {
      unpin()
    }
  }

  /** Gives up ingested content that will not be recorded (a refused upload): unpinned and collected. */
  async discard(content: PackContent, ingested: IngestedPack): Promise<void> {
    ingested.release()
    await this.collect(content, ingested.digest)
  }

  /** Removes a content tree once no pack row references it; failures are logged, never the request's. */
  async collect(content: PackContent, digest: string): Promise<void> {
    try {
      await content.removeIfUnused(digest, () => this.#deps.store.packs.digestInUse(digest))
    } catch (err) {
      this.#deps.logger.warn({ err, digest }, 'removing unused pack content failed')
    }
  }

  /** Runs `work` while `ingested` is pinned; on failure its tree is collected, and it is always released. */
  async #holding<T>(content: PackContent, ingested: IngestedPack, work: () => Promise<T>): Promise<T> {
    try {
      return await work()
    } catch (err) {
      await this.discard(content, ingested)
      throw err
    } finally {
      ingested.release()
    }
  }

  #push(content: PackContent, orgId: string, name: string, version: string, digest: string): Promise<string | undefined> {
    return pushImage(this.#deps.packRegistry, this.#deps.logger, content, { orgId, name, version, digest })
  }

  /**
   * Replaces a pack's content (re-upload, PUT image_ref) in one transaction that first touches the
   * row — taking its lock on Postgres; SQLite transactions run one at a time — so the digest read
   * is the one this update replaces, even when two replacements race (each then collects what it
   * replaced, and no tree is left behind). The agent rule is checked again inside, against the
   * row as it is now.
   */
  #replaceContent(actor: PackActor, packId: string, patch: PackPatch & { manifest: PackManifest }, extra: Record<string, unknown>): Promise<{ pack: PackRecord; replaced?: string }> {
    const { orgId } = actor
    return this.#mutate(actor, async (tx, record) => {
      const before = (await tx.packs.update(orgId, packId, {})) ?? throwNotFound()
      await checkAgentChange(tx, orgId, before, patch.manifest)
      const pack = (await tx.packs.update(orgId, packId, patch)) ?? throwNotFound()
      record('content_pack_updated', pack, { image_ref: pack.image_ref ?? '', ...extra })
      return { pack, ...(before.image_digest ? { replaced: before.image_digest } : {}) }
    })
  }

  /** Respawns the idle workspaces of every role attaching the pack; a failure is logged, the change stands. */
  async #restartAttaching(packId: string): Promise<void> {
    const control = this.#deps.workspaceControl
    if (!control) return
    const byOrg = new Map<string, string[]>()
    for (const r of await this.#deps.store.packs.rolesAttaching(packId)) byOrg.set(r.org_id, [...(byOrg.get(r.org_id) ?? []), r.role_id])
    for (const [orgId, roleIds] of byOrg) {
      for (const roleId of roleIds) {
        try {
          await control.restartIdleForRole(orgId, roleId)
        } catch (err) {
          this.#deps.logger.warn({ err, role_id: roleId }, 'restarting idle workspaces after a configuration change failed')
        }
      }
    }
  }

  /**
   * A pack change and its content_pack_* event (spec Events: resource_id, name and version, plus
   * the type's own keys) in one transaction (src/audit/mutation.ts).
   */
  #mutate<T>(actor: PackActor, fn: (tx: StoreTransaction, record: (type: EventType, pack: PackRecord, extra?: Record<string, unknown>) => void) => Promise<T>): Promise<T> {
    return auditedMutation(this.#deps.store, this.#deps.audit, (tx, record) => fn(tx, (type, pack, extra = {}) => {
      const detail: Record<string, unknown> = { resource_id: pack.id, name: pack.name }
      if (type !== 'content_pack_cloned') detail.version = pack.version
      record({ org_id: actor.orgId, user_id: actor.userId, event_type: type, detail: { ...detail, ...extra } })
    }))
  }
}

/** A racing create that passed the pre-check still meets the unique index: same answer. */
function duplicateName(name: string) {
  return (err: unknown): never => {
    if (isUniqueViolation(err)) throw apiError('conflict', `a pack named ${name} already exists`, { fields: { name: 'already exists' } })
    throw err
  }
}

function throwNotFound(): never {
  throw notFound('pack')
}
