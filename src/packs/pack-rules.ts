// The rules a pack change must keep (docs/packs.md): a role's pack_ids, packs that start providing
// the agent, suggested_packs, and the record fields a pack.yaml determines. Errors are the API's
// (validation_error on a named field, 409 pack_in_use / conflict).
import { apiError, type PackManifest } from '../contract/index.js'
import type { PackRecord, StoreTransaction } from '../store/index.js'
import type { IngestedPack } from './content.js'
import { PACK_NAME_PATTERN } from './manifest.js'

/** 400 validation_error on one field, as schema validation errors name it. */
export function fieldError(field: string, message: string) {
  return apiError('validation_error', `${field} ${message}`, { fields: { [field]: message } })
}

export function nameTaken(name: string) {
  return apiError('conflict', `a pack named ${name} already exists in this organisation`, { fields: { name: 'already exists' } })
}

/**
 * A role's `pack_ids` (create and patch): every id is a pack the org can see, and at most one of
 * them provides the agent command, and no two share a name (docs/packs.md). Validation errors
 * name the field `pack_ids`. Returns the name of the pack that provides the agent, if one does.
 */
export async function checkPackIds(tx: Pick<StoreTransaction, 'packs'>, orgId: string, ids: readonly string[]): Promise<string | undefined> {
  if (ids.length === 0) return undefined
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
  return agents[0]?.name
}

/**
 * New content that makes a pack provide an agent it did not provide before (docs/packs.md
 * "Packs that provide the agent"): refused (409 `pack_in_use`) while a non-archived role of
 * another org attaches the pack — it would run as their agent, with their tokens — and, for the
 * org's own roles, when a role attaching it already has another agent pack (the rule
 * checkPackIds applies to pack_ids). Changing or removing an existing agent is not restricted.
 */
export async function checkAgentChange(repos: Pick<StoreTransaction, 'packs' | 'agentRoles'>, orgId: string, current: PackRecord, next: PackManifest): Promise<void> {
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

/** `suggested_packs` as stored: pack names, trimmed, de-duplicated, comma-separated; empty → null. */
export function normaliseSuggested(value: string): string | null {
  const names = value.split(',').map((s) => s.trim()).filter((s) => s !== '')
  const bad = names.find((n) => !new RegExp(PACK_NAME_PATTERN).test(n))
  if (bad !== undefined) throw fieldError('suggested_packs', `"${bad}" is not a pack name`)
  return names.length > 0 ? [...new Set(names)].join(',') : null
}

/** The record fields a pack.yaml and its content determine (create and re-upload). */
export function manifestFields(ingested: IngestedPack) {
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
