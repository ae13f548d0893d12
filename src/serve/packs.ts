// The pack content store: extracted pack trees by digest under `<data-dir>/packs` (upload limits
// from CORRAL_PACK_MAX_BYTES and friends). One instance, shared by the /v1/packs routes (uploads,
// collection) and the workspace controller (mounts, pins). Opening it removes the leftovers of
// ingests a crash interrupted.
import { join } from 'node:path'
import { PackContent } from '../packs/index.js'
import type { ServeConfig } from './config.js'

export async function openPackContent(config: Pick<ServeConfig, 'dataDir' | 'packArchiveLimits'>): Promise<PackContent> {
  const content = new PackContent(join(config.dataDir, 'packs'), config.packArchiveLimits)
  await content.sweep()
  return content
}
