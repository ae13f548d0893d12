// How the provider and role commands draw records for people, and how a role save refused with
// invalid_capabilities is shown: the server's compiler diagnostics in `caps lint`'s text format,
// pointing into the caps.yaml the user wrote.
import { ApiError, type AgentRoleRecord, type ProviderRecord } from '../client/index.js'
import type { Diagnostic } from '../policy/index.js'
import { FindingsExit, UsageError } from './errors.js'
import { diag, table } from './output.js'
import { RoleFileError } from './role-file.js'

export function providerTable(rows: readonly ProviderRecord[]): string {
  return table(rows, [
    { header: 'name', get: (p) => p.name },
    { header: 'kind', get: (p) => p.kind },
    { header: 'domain', get: (p) => p.domain },
    { header: 'default_model', get: (p) => p.default_model },
    { header: 'archived', get: (p) => (p.archived_at ? 'yes' : '') },
    { header: 'id', get: (p) => p.id },
  ])
}

export function roleTable(rows: readonly AgentRoleRecord[], providers: ReadonlyMap<string, string>): string {
  return table(rows, [
    { header: 'name', get: (r) => r.name },
    { header: 'provider', get: (r) => providers.get(r.provider_id) ?? r.provider_id },
    { header: 'model', get: (r) => r.model },
    { header: 'environment', get: (r) => r.environment },
    { header: 'agent', get: (r) => r.agent_kind ?? '' },
    { header: 'pool', get: (r) => (r.pool_policy ? `${r.pool_policy} ${r.pool_size ?? 0}/${r.pool_max_size ?? '-'}` : '') },
    { header: 'archived', get: (r) => (r.archived_at ? 'yes' : '') },
    { header: 'id', get: (r) => r.id },
  ])
}

/** `key  value` lines for one record; the capabilities text is shown below, indented. */
export function details(record: object, order: readonly string[]): string {
  const entries = order.filter((k) => k !== 'capabilities' && (record as Record<string, unknown>)[k] !== undefined)
  const width = Math.max(...entries.map((k) => k.length))
  let out = ''
  for (const k of entries) {
    const v = (record as Record<string, unknown>)[k]
    out += `${k.padEnd(width)}  ${Array.isArray(v) ? v.join(', ') : String(v)}\n`
  }
  const caps = (record as { capabilities?: string }).capabilities
  if (caps !== undefined) out += `capabilities:\n${caps.replace(/\n$/, '').split('\n').map((l) => `  ${l}`).join('\n')}\n`
  return out
}

export const PROVIDER_FIELDS = ['id', 'name', 'display_name', 'description', 'kind', 'domain', 'base_url', 'default_model', 'created_by', 'created_at', 'updated_at', 'archived_at'] as const
export const ROLE_FIELDS = [
  'id', 'name', 'display_name', 'description', 'provider_id', 'model', 'environment', 'environment_description', 'task_timeout_seconds',
  'idle_timeout_seconds', 'thinking_effort', 'max_continuations', 'max_context_tokens', 'pool_policy', 'pool_size', 'pool_max_size',
  'pack_ids', 'agent_kind', 'created_by', 'created_at', 'updated_at', 'archived_at', 'capabilities',
] as const

/**
 * One stderr line per credential or secret the saved role's policy names that the org lacks (the
 * role was saved; docs/roles.md). On stderr in every mode, so `--json` output stays the record.
 */
export function printRoleWarnings(role: AgentRoleRecord): AgentRoleRecord {
  for (const w of role.warnings ?? []) {
    const what = w.code === 'missing_credential' ? 'credential' : 'secret'
    diag(`warning: ${what} ${w.name} does not exist in this organisation (named by ${w.capabilities.join(', ')}); ${w.code === 'missing_credential' ? 'create it with `corral credential create`' : 'set it with `corral secret set`'}`)
  }
  return role
}

/** A role's pack_ids for people: `name (pack_…)` for the packs whose names are known, the bare id otherwise. */
export function labelPackIds(role: AgentRoleRecord, names: ReadonlyMap<string, string>): AgentRoleRecord {
  return { ...role, pack_ids: role.pack_ids.map((id) => (names.has(id) ? `${names.get(id)} (${id})` : id)) }
}

/**
 * The diagnostics of an invalid_capabilities refusal, exactly as `caps lint` prints them; undefined
 * for any other error. The policy module (the compiler) is loaded only on this path, not at start-up.
 */
export async function capabilitiesReport(err: unknown, caps: { file: string; source: string } | undefined): Promise<string | undefined> {
  if (!(err instanceof ApiError) || err.code !== 'invalid_capabilities') return undefined
  const diagnostics = (err.envelope.details?.diagnostics ?? []) as Diagnostic[]
  const file = caps?.file ?? 'capabilities'
  const { formatText } = await import('../policy/index.js')
  return formatText({ files: [{ file, valid: false, diagnostics }] }, new Map([[file, caps?.source ?? '']]))
}

/** A malformed role file is a usage error (exit 2). */
export function asUsage(err: unknown): never {
  if (err instanceof RoleFileError) throw new UsageError(err.message)
  throw err
}

/** invalid_capabilities: the compiler's diagnostics like `caps lint` (people), or the envelope (--json); exit 1 either way. */
export async function failWithDiagnostics(err: unknown, caps: { file: string; source: string } | undefined, json: boolean): Promise<never> {
  const report = json ? undefined : await capabilitiesReport(err, caps)
  if (report === undefined) throw err
  diag(report)
  throw new FindingsExit('capabilities do not compile')
}
