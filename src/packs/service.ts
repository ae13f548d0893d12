// The pack content store as one of `corral serve`'s services: it is created with the data dir
// (`<data-dir>/packs`, upload limit from CORRAL_PACK_MAX_BYTES) and placed in ServerDeps before the
// workspace controller and the API start, so both find it there. Start removes the leftovers of
// ingests a crash interrupted.
import { join } from 'node:path'
import type { ServiceFactory } from '../server/serve.js'
import { archiveLimitsFromEnv } from './archive.js'
import { PackContent } from './content.js'
import { registrySettingsFromEnv, type RegistrySettings } from './registry-settings.js'

declare module '../server/types.js' {
  interface ServerDeps {
    /** Extracted pack trees by digest (routes/packs.ts; the workspace controller mounts them). Absent → pack uploads answer 503. */
    packContent?: PackContent
    /** Where pack images are pushed and pulled (CORRAL_PACK_REGISTRY and friends, docs/packs.md "Registry"). */
    packRegistry?: RegistrySettings
  }
}

export const packService: ServiceFactory = ({ deps, options }) => {
  const content = new PackContent(join(options.dataDir, 'packs'), archiveLimitsFromEnv(options.env ?? process.env))
  deps.packContent = content
  deps.packRegistry = registrySettingsFromEnv(options.env ?? process.env)
  return {
    name: 'packs',
    start: () => content.sweep(),
    stop: async () => {},
  }
}
