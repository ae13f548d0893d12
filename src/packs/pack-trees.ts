// Pack trees on the replica that needs them (docs/packs.md "Pack trees on every replica"). A pack's
// content tree lands on the disk of the replica that received the upload or the pull; another
// replica launching a workspace with that pack pulls it from the registry by the pack's
// `image_ref` (pinned by digest when the reference carries one), through the same safe reader and
// ingest as any pull, and keeps it only when the tree it gets hashes to the pack's `image_digest`.
import { CorralError } from '../contract/index.js'
import type { PackContent } from './content.js'
import { pullPackImage } from './registry-image.js'
import type { RegistrySettings } from './registry-settings.js'

/** The part of a pack row a pull needs. */
export interface PackTreeRecord {
  name: string
  image_digest?: string | null
  image_ref?: string | null
}

export class PackTreeUnavailable extends CorralError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('registry_unavailable', message, 502, undefined, options)
    this.name = 'PackTreeUnavailable'
  }
}

export class PackTrees {
  readonly #content: PackContent
  readonly #registry: RegistrySettings
  /** Pulls in flight by digest: concurrent launches needing one tree share one pull. */
  readonly #pulling = new Map<string, Promise<void>>()

  constructor(content: PackContent, registry: RegistrySettings) {
    this.#content = content
    this.#registry = registry
  }

  /**
   * Resolves once the pack's tree is on this replica: at once when it is here, else after a pull
   * from its `image_ref`. Rejects (PackTreeUnavailable) when the pack has no `image_ref`, the pull
   * fails, or what was pulled is not the pack's content.
   */
  async ensure(pack: PackTreeRecord): Promise<void> {
    const digest = pack.image_digest
    if (!digest || (await this.#content.has(digest))) return
    const running = this.#pulling.get(digest)
    if (running) return running
    const pull = this.#pull(pack, digest).finally(() => this.#pulling.delete(digest))
    this.#pulling.set(digest, pull)
    return pull
  }

  async #pull(pack: PackTreeRecord, digest: string): Promise<void> {
    const what = `pack ${pack.name} (${digest}) is not on this replica`
    if (!pack.image_ref) {
      throw new PackTreeUnavailable(`${what} and has no image_ref to pull it from (it was stored before CORRAL_PACK_REGISTRY was set: re-upload it)`)
    }
    let got: string
    try {
      const { ingested } = await pullPackImage(this.#registry, this.#content, pack.image_ref)
      ingested.release()
      got = ingested.digest
    } catch (err) {
      throw new PackTreeUnavailable(`${what} and pulling ${pack.image_ref} failed: ${(err as Error).message}`, { cause: err })
    }
    // A tag that moved brings other content: it is kept under its own digest (harmless, content
    // addressed) but never mounted as this pack.
    if (got !== digest) throw new PackTreeUnavailable(`${what} and ${pack.image_ref} now holds other content (${got})`)
  }
}
