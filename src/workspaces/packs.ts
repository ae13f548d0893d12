// The packs of a workspace, resolved at each agent launch from its role's `pack_ids` (docs/
// workspaces.md "Packs"): what to mount, which agent to run, and which extra agent-event schemas
// apply. Reading them at launch is what makes a role or pack change take effect with the
// workspace's next agent (the change restarts idle workspaces: `workspace_restarted`).
import type { AgentEventType } from '../contract/index.js'
import type { PackMount } from '../runtime/index.js'
import { packEventValidators, type PackEventValidators } from './agent-event-schemas.js'

/** The part of a pack row (store.packs, src/packs) a workspace needs. */
export interface WorkspacePackRecord {
  id: string
  name: string
  /** Absent for a registry-origin pack not built yet: no content here, so it is left out. */
  image_digest?: string
  /** The pack's image in the registry (pinned by digest), when it was pushed or pulled there. */
  image_ref?: string | null
  manifest: {
    agent?: { command: string[]; env?: Record<string, string> }
    agent_events?: Partial<Record<AgentEventType, Record<string, unknown>>>
  }
}

/** Where the packs come from: the store's visibility rule and the content store's trees. */
export interface PackSource {
  /** Packs visible to the org, in the given order; missing or invisible ids are left out. */
  findVisible(orgId: string, ids: readonly string[]): Promise<WorkspacePackRecord[]>
  /** Host path of the extracted, read-only tree of a content digest. */
  dir(digest: string): string
  /** Keeps a digest's tree from being collected until the returned function is called. */
  pin?(digest: string): () => void
}

export interface WorkspacePacks {
  mounts: PackMount[]
  /** Content digests of the mounted trees (pinned while the agent runs). */
  digests: string[]
  /** The agent a pack provides (the first attached pack that declares one). */
  agent?: { pack: string; command: string[]; env: Record<string, string> }
  /** Compiled `agent_events` schemas of the packs that declare some. */
  schemas: PackEventValidators[]
}

export const NO_PACKS: WorkspacePacks = Object.freeze({ mounts: [], digests: [], schemas: [] })

/**
 * Resolves a role's packs. A pack the org can no longer see (deleted, made private by its owner)
 * is left out rather than failing the workspace, which keeps running with what remains. Throws
 * when a pack's schema does not compile (it passed the same compiler at upload).
 */
export async function resolveWorkspacePacks(source: PackSource | undefined, orgId: string, packIds: readonly string[]): Promise<WorkspacePacks> {
  if (!source || packIds.length === 0) return NO_PACKS
  const packs = await source.findVisible(orgId, packIds)
  const out: WorkspacePacks = { mounts: [], digests: [], schemas: [] }
  for (const p of packs) {
    if (!p.image_digest) continue
    // Two attached packs with one name (own and community): the first one keeps the directory.
    if (out.mounts.some((m) => m.name === p.name)) continue
    out.mounts.push({ name: p.name, dir: source.dir(p.image_digest), ...(p.image_ref ? { imageRef: p.image_ref } : {}) })
    if (!out.digests.includes(p.image_digest)) out.digests.push(p.image_digest)
    if (p.manifest.agent && !out.agent) {
      out.agent = { pack: p.name, command: [...p.manifest.agent.command], env: { ...p.manifest.agent.env } }
    }
    if (p.manifest.agent_events && Object.keys(p.manifest.agent_events).length > 0) {
      out.schemas.push(packEventValidators({ name: p.name, digest: p.image_digest, agent_events: p.manifest.agent_events }))
    }
  }
  return out
}
