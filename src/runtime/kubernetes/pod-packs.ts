// A launch's packs in a pod (docs/kubernetes.md "Runtime: warm pools and packs"): each pack's OCI
// image by digest becomes an image volume mounted read-only at /packs/<name>, and the agent sees
// the same variables and the same command resolution as in a local sandbox (pack-mounts.ts).
import { RuntimeError } from '../errors.js'
import { packLaunch } from '../pack-mounts.js'
import type { AgentLaunch } from '../runtime.js'
import { POD_PATHS } from './manifests.js'

/** `<registry>/<repository>@sha256:<64 hex>`: only an image pinned by digest is mounted. */
const BY_DIGEST = /^[^\s@]+@sha256:[0-9a-f]{64}$/

export interface PodPacks {
  command: readonly string[]
  mounts: { name: string; imageRef: string }[]
  env: Record<string, string>
}

export function podPacks(launch: AgentLaunch): PodPacks {
  const packs = launch.packs ?? []
  if (packs.length === 0 && launch.commandPack === undefined) return { command: launch.command, mounts: [], env: {} }
  const { command, env } = packLaunch(launch, POD_PATHS.packs)
  const mounts = packs.map((p) => {
    if (!p.imageRef) {
      throw new RuntimeError('runtime_unavailable', `pack ${p.name} has no image in the registry, which a pod mounts it from: set CORRAL_PACK_REGISTRY and upload it again (docs/kubernetes.md "Runtime: warm pools and packs")`)
    }
    if (!BY_DIGEST.test(p.imageRef)) throw new RuntimeError('runtime_unavailable', `pack ${p.name}'s image ${p.imageRef} is not pinned by digest`)
    return { name: p.name, imageRef: p.imageRef }
  })
  return { command, mounts, env }
}
