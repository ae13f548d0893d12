// The registry side of the pack service: who may pull what, how a pull or push failure is
// answered, and pushing a pack's image when a push registry is configured (docs/packs.md "Registry").
import { apiError } from '../contract/index.js'
import type { Store } from '../store/index.js'
import type { PackContent } from './content.js'
import { RegistryError, parseImageRef, type ImageRef } from './registry-ref.js'
import { registrySettingsFromEnv, type RegistrySettings } from './registry-settings.js'
import { pushPackImage, sameImage, type PullAccess } from './registry-image.js'

/** Without settings (a server built without registry settings), no registry is allowed and nothing is pushed. */
export const NO_REGISTRY = registrySettingsFromEnv({})

/** Pulls for `orgId`: into the push registry's namespace, only its own images or image_refs of packs it can see. */
export function pullAccess(store: Pick<Store, 'packs'>, orgId: string): PullAccess {
  return {
    orgId,
    async canSee(ref: ImageRef) {
      return (await store.packs.list(orgId)).some((pk) => pk.image_ref !== undefined && sameImage(parseStored(pk.image_ref), ref))
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
export function pullFailure(err: unknown): never {
  if (!(err instanceof RegistryError)) throw err
  if (err.kind === 'unreachable') throw apiError('registry_unavailable', err.message)
  throw apiError('validation_error', err.message, { fields: { image_ref: err.message } })
}

export interface PushLogger {
  warn(obj: object, msg: string): void
}

/**
 * Pushes the pack's image when a push registry is configured (CORRAL_PACK_REGISTRY) and resolves
 * with its reference by digest; without one, undefined. Any push failure is the registry's
 * (the content is already checked): 502 `registry_unavailable`.
 */
export async function pushImage(
  settings: RegistrySettings | undefined,
  logger: PushLogger,
  content: PackContent,
  target: { orgId: string; name: string; version: string; digest: string },
): Promise<string | undefined> {
  if (!settings?.push) return undefined
  try {
    return await pushPackImage(settings, content, target)
  } catch (err) {
    if (!(err instanceof RegistryError)) throw err
    logger.warn({ registry: settings.push.registry, kind: err.kind, message: err.message }, 'pushing a pack image failed')
    throw apiError('registry_unavailable', `pushing the pack image failed: ${err.message}`)
  }
}
