// role.yaml: an agent role as a file, for `corral role create -f` and `role update -f`. The keys are
// the API's role fields, plus three conveniences (docs/roles.md):
//   provider: <name or prov_ id>         instead of provider_id
//   capabilities_file: <path>            a caps.yaml, relative to the role file
//   packs: [<name or pack_ id>, …]       instead of pack_ids
// `capabilities:` may instead hold the caps.yaml text inline (a block scalar). Unknown keys are
// refused so a typo never silently drops a setting.
import { readFile } from 'node:fs/promises'
import { dirname, isAbsolute, relative, resolve } from 'node:path'
import { parse } from 'yaml'
import type { AgentRoleInput } from '../client/index.js'

/** The role file is unreadable or malformed (the CLI exits 2). */
export class RoleFileError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'RoleFileError'
  }
}

export interface RoleFile {
  /** The API body, minus provider_id when the file names the provider (resolve `provider`). */
  body: AgentRoleInput
  /** `provider:` as written (a name or an id), when the file used it. */
  provider?: string
  /** `packs:` as written (names or ids), when the file used it; resolve to `body.pack_ids`. */
  packs?: string[]
  /** Where the capabilities came from (the caps file path as given relative to the cwd, or the role file) and their text, for diagnostics. */
  capabilities?: { file: string; source: string }
}

const STRING_KEYS = ['name', 'display_name', 'description', 'provider_id', 'model', 'environment', 'environment_description', 'thinking_effort', 'pool_policy', 'agent_kind'] as const
const INT_KEYS = ['task_timeout_seconds', 'idle_timeout_seconds', 'max_continuations', 'max_context_tokens', 'pool_size', 'pool_max_size'] as const
const OTHER_KEYS = ['provider', 'capabilities', 'capabilities_file', 'pack_ids', 'packs', 'resources'] as const
const KNOWN = new Set<string>([...STRING_KEYS, ...INT_KEYS, ...OTHER_KEYS])

export async function readRoleFile(path: string): Promise<RoleFile> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (e) {
    throw new RoleFileError(`cannot read role file ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`)
  }
  let doc: unknown
  try {
    doc = parse(text)
  } catch (e) {
    throw new RoleFileError(`${path}: not valid YAML: ${(e as Error).message.split('\n')[0]}`)
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) throw new RoleFileError(`${path}: expected a mapping of role fields`)
  const raw = doc as Record<string, unknown>

  const unknown = Object.keys(raw).filter((k) => !KNOWN.has(k))
  if (unknown.length) throw new RoleFileError(`${path}: unknown key${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')} (see docs/roles.md)`)

  const body: Record<string, unknown> = {}
  for (const key of STRING_KEYS) {
    if (raw[key] === undefined) continue
    if (raw[key] !== null && typeof raw[key] !== 'string') throw new RoleFileError(`${path}: ${key} must be a string`)
    body[key] = raw[key]
  }
  for (const key of INT_KEYS) {
    if (raw[key] === undefined) continue
    if (raw[key] !== null && !Number.isInteger(raw[key])) throw new RoleFileError(`${path}: ${key} must be an integer`)
    body[key] = raw[key]
  }
  if (raw.pack_ids !== undefined) {
    if (!Array.isArray(raw.pack_ids) || raw.pack_ids.some((p) => typeof p !== 'string')) throw new RoleFileError(`${path}: pack_ids must be a list of strings`)
    body.pack_ids = raw.pack_ids
  }

  if (raw.resources !== undefined) {
    // The shape and the quantities are the API's to check (one validation_error naming the field); the file only needs a mapping, or null to clear.
    if (raw.resources !== null && (typeof raw.resources !== 'object' || Array.isArray(raw.resources))) {
      throw new RoleFileError(`${path}: resources must be a mapping of requests and limits (or null to clear them)`)
    }
    body.resources = raw.resources
  }

  const out: RoleFile = { body: body as AgentRoleInput }
  if (raw.provider !== undefined) {
    if (typeof raw.provider !== 'string' || raw.provider === '') throw new RoleFileError(`${path}: provider must be a provider name or id`)
    if (raw.provider_id !== undefined) throw new RoleFileError(`${path}: give provider or provider_id, not both`)
    out.provider = raw.provider
  }
  if (raw.packs !== undefined) {
    if (raw.pack_ids !== undefined) throw new RoleFileError(`${path}: give packs or pack_ids, not both`)
    if (!Array.isArray(raw.packs) || raw.packs.some((p) => typeof p !== 'string' || p === '')) throw new RoleFileError(`${path}: packs must be a list of pack names`)
    out.packs = raw.packs as string[]
  }

  if (raw.capabilities !== undefined && raw.capabilities_file !== undefined) throw new RoleFileError(`${path}: give capabilities or capabilities_file, not both`)
  if (raw.capabilities_file !== undefined) {
    if (typeof raw.capabilities_file !== 'string' || raw.capabilities_file === '') throw new RoleFileError(`${path}: capabilities_file must be a path`)
    const capsPath = isAbsolute(raw.capabilities_file) ? raw.capabilities_file : resolve(dirname(path), raw.capabilities_file)
    let source: string
    try {
      source = await readFile(capsPath, 'utf8')
    } catch (e) {
      throw new RoleFileError(`${path}: cannot read capabilities_file ${raw.capabilities_file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`)
    }
    out.body.capabilities = source
    out.capabilities = { file: relative(process.cwd(), capsPath) || capsPath, source }
  } else if (raw.capabilities !== undefined) {
    if (raw.capabilities !== null && typeof raw.capabilities !== 'string') {
      throw new RoleFileError(`${path}: capabilities must be caps.yaml text (a block scalar, "capabilities: |") or use capabilities_file`)
    }
    ;(out.body as Record<string, unknown>).capabilities = raw.capabilities
    if (typeof raw.capabilities === 'string') out.capabilities = { file: `${path} (capabilities)`, source: raw.capabilities }
  }
  return out
}
