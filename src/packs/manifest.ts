// pack.yaml: the manifest at the root of every pack archive (docs/packs.md). Parsed with `yaml`,
// checked with one ajv schema (every problem reported per field in details.fields), then the
// fields ajv cannot judge alone: agent event types against the closed enum, and each agent event
// schema compiled the way request_schema is (no external $ref). The capabilities fragment is a
// *path* here; src/packs/content.ts reads and compiles the file it names.
import { createRequire } from 'node:module'
import type { ValidateFunction } from 'ajv'
import { parseDocument } from 'yaml'
import { AGENT_EVENT_TYPES, type AgentEventType, apiError, type PackAgent, type PackManifest } from '../contract/index.js'
import { compileSchema } from '../policy/index.js'

/**
 * Pack names follow role names (NAME_SCHEMA in src/server/schemas/common.ts, which
 * test/packs/manifest.test.ts compares with this one). Kept here so the CLI can validate a
 * pack.yaml without loading the server.
 */
export const PACK_NAME_PATTERN = '^[A-Za-z][A-Za-z0-9_-]{0,63}$'
const NAME_RE = new RegExp(PACK_NAME_PATTERN)

/** Largest pack.yaml read (bytes). */
export const MAX_MANIFEST_BYTES = 256 * 1024

const text = (maxLength: number) => ({ type: 'string', minLength: 1, maxLength }) as const

const manifestSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'version'],
  properties: {
    name: { type: 'string', pattern: PACK_NAME_PATTERN },
    version: text(64),
    display_name: text(200),
    description: { type: 'string', maxLength: 2000 },
    category: text(100),
    suggested_packs: {
      oneOf: [
        { type: 'string', maxLength: 2000 },
        { type: 'array', maxItems: 50, items: { type: 'string', pattern: PACK_NAME_PATTERN } },
      ],
    },
    capabilities: text(1024),
    agent: {
      type: 'object',
      additionalProperties: false,
      required: ['command'],
      properties: {
        command: { type: 'array', minItems: 1, maxItems: 256, items: { type: 'string', minLength: 1, maxLength: 4096 } },
        env: {
          type: 'object',
          maxProperties: 100,
          propertyNames: { pattern: '^[A-Za-z_][A-Za-z0-9_]*$' },
          additionalProperties: { type: 'string', maxLength: 8192 },
        },
      },
    },
    agent_events: { type: 'object', additionalProperties: { type: 'object' } },
  },
} as const

const require = createRequire(import.meta.url)
let compiled: ValidateFunction | undefined
/** Compiled at the first manifest read, not at import: an idle server holds no ajv for it. */
function manifestValidator(): ValidateFunction {
  return (compiled ??= new (require('ajv') as typeof import('ajv')).Ajv({ allErrors: true, strict: true }).compile(manifestSchema))
}

/**
 * Parses and validates pack.yaml text. Throws a CorralError `validation_error` whose
 * `details.fields` maps each field (`name`, `agent.command`, `agent_events.tool_call`, …) to its
 * problem; a YAML syntax error is reported under `pack.yaml`.
 */
export function parsePackManifest(source: string): PackManifest {
  if (Buffer.byteLength(source) > MAX_MANIFEST_BYTES) fail({ 'pack.yaml': `is larger than ${MAX_MANIFEST_BYTES} bytes` })
  const doc = parseDocument(source, { uniqueKeys: true, prettyErrors: false })
  if (doc.errors.length > 0) {
    const e = doc.errors[0]!
    const at = e.linePos?.[0] ? ` (line ${e.linePos[0].line}, column ${e.linePos[0].col})` : ''
    fail({ 'pack.yaml': `is not valid YAML: ${e.message.split('\n')[0]}${at}` })
  }
  let raw: unknown
  try {
    // maxAliasCount guards against alias expansion bombs ("billion laughs").
    raw = doc.toJS({ maxAliasCount: 100 })
  } catch (err) {
    fail({ 'pack.yaml': `cannot be read: ${(err as Error).message}` })
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) fail({ 'pack.yaml': 'must be a mapping of fields (name, version, …)' })
  const validate = manifestValidator()
  if (!validate(raw)) fail(fieldsOf(validate.errors ?? []))

  const m = raw as {
    name: string; version: string; display_name?: string; description?: string; category?: string
    suggested_packs?: string | string[]; capabilities?: string; agent?: PackAgent; agent_events?: Record<string, Record<string, unknown>>
  }
  const fields: Record<string, string> = {}
  const suggested = normaliseSuggested(m.suggested_packs, fields)
  if (m.capabilities !== undefined && !isInsidePath(m.capabilities)) fields.capabilities = 'must be a relative path inside the pack (no leading /, no ..)'
  const events = checkAgentEvents(m.agent_events, fields)
  if (Object.keys(fields).length > 0) fail(fields)

  return {
    name: m.name,
    version: m.version,
    display_name: m.display_name ?? m.name,
    // YAML's folded and literal blocks (`>`, `|`) end with a newline that is not part of the text.
    ...(m.description?.trim() ? { description: m.description.trimEnd() } : {}),
    ...(m.category ? { category: m.category } : {}),
    ...(suggested ? { suggested_packs: suggested } : {}),
    ...(m.capabilities !== undefined ? { capabilities_file: normalisePath(m.capabilities) } : {}),
    ...(m.agent ? { agent: { command: [...m.agent.command], ...(m.agent.env ? { env: { ...m.agent.env } } : {}) } } : {}),
    ...(events ? { agent_events: events } : {}),
  }
}

/** A relative path that stays inside the pack once normalised. */
export function isInsidePath(path: string): boolean {
  if (path.includes('\0') || path.startsWith('/') || path.includes('\\')) return false
  const parts = path.split('/').filter((p) => p !== '' && p !== '.')
  return parts.length > 0 && !parts.includes('..')
}

function normalisePath(path: string): string {
  return path.split('/').filter((p) => p !== '' && p !== '.').join('/')
}

function normaliseSuggested(value: string | string[] | undefined, fields: Record<string, string>): string | undefined {
  if (value === undefined) return undefined
  const names = (Array.isArray(value) ? value : value.split(',')).map((s) => s.trim()).filter((s) => s !== '')
  const bad = names.find((n) => !NAME_RE.test(n))
  if (bad !== undefined) {
    fields.suggested_packs = `"${bad}" is not a pack name (letter first, then letters, digits, _ or -)`
    return undefined
  }
  return names.length > 0 ? [...new Set(names)].join(',') : undefined
}

function checkAgentEvents(
  value: Record<string, Record<string, unknown>> | undefined,
  fields: Record<string, string>,
): PackManifest['agent_events'] | undefined {
  if (value === undefined) return undefined
  const known = new Set<string>(AGENT_EVENT_TYPES)
  const out: Partial<Record<AgentEventType, Record<string, unknown>>> = {}
  for (const [type, schema] of Object.entries(value)) {
    if (!known.has(type)) {
      fields[`agent_events.${type}`] = `is not an agent event type (one of ${AGENT_EVENT_TYPES.join(', ')})`
      continue
    }
    const compiled = compileSchema(schema)
    if (!compiled.ok) {
      fields[`agent_events.${type}`] = compiled.message
      continue
    }
    out[type as AgentEventType] = schema
  }
  return Object.keys(out).length > 0 ? out : undefined
}

interface Issue {
  instancePath: string
  keyword: string
  message?: string
  params: Record<string, unknown>
}

/** One message per field, named with dots (`agent.command`), as the API's details.fields. */
function fieldsOf(issues: readonly Issue[]): Record<string, string> {
  const fields: Record<string, string> = {}
  for (const issue of issues) {
    const path = issue.instancePath.replace(/^\//, '').split('/').filter(Boolean).map((s) => s.replaceAll('~1', '/').replaceAll('~0', '~'))
    let message = issue.message ?? 'is invalid'
    if (issue.keyword === 'required') path.push(String(issue.params.missingProperty))
    if (issue.keyword === 'required') message = 'is required'
    if (issue.keyword === 'additionalProperties') {
      path.push(String(issue.params.additionalProperty))
      message = 'is not a known field'
    }
    if (issue.keyword === 'pattern' && path[0] === 'name') message = 'must start with a letter and have at most 64 letters, digits, _ or -'
    if (issue.keyword === 'oneOf' && path[0] === 'suggested_packs') message = 'must be a list of pack names or a comma-separated string'
    const name = path.join('.') || 'pack.yaml'
    // oneOf reports each branch too; keep the first (clearest) message per field.
    fields[name] ??= message
  }
  return fields
}

function fail(fields: Record<string, string>): never {
  const summary = Object.entries(fields).map(([k, v]) => `${k} ${v}`).join('; ')
  throw apiError('validation_error', `invalid pack.yaml: ${summary}`, { fields })
}
