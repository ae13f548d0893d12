// Body schemas of the agent events (spec "Agent events": the proxy validates the body against the
// workspace's agent event schemas). corral's own schemas, one per type of the closed enum: each
// names the fields the control plane and the people's views rely on (task_end's `status` completes
// the task; iteration numbers, tool names and file paths are what the live views show) and leaves
// every other field open, because `detail` is otherwise opaque and other agents may add their own.
// Documented in docs/workspaces.md ("Agent events").
import { createRequire } from 'node:module'
import type { ErrorObject, ValidateFunction } from 'ajv'
import { AGENT_EVENT_TYPES, TASK_OUTCOME_STATUSES, type AgentEventType } from '../contract/index.js'
import { compileSchema } from '../policy/index.js'

type Schema = Record<string, unknown>

const str = { type: 'string' }
const iteration = { type: 'integer', minimum: 0 }
const count = { type: 'integer', minimum: 0 }

/** Typed fields per event type; `required` lists those that must be present. */
const FIELDS: Record<AgentEventType, { properties?: Record<string, Schema>; required?: string[] }> = {
  session_start: { properties: { session_id: str, provider: str, model: str } },
  session_end: { properties: { session_id: str, tasks: count } },
  session_wrap_up: { properties: { session_id: str } },
  task_start: { properties: { description: str, session_id: str } },
  task_end: {
    properties: { status: { enum: TASK_OUTCOME_STATUSES }, summary: str, reason: str, iterations: count },
    required: ['status'],
  },
  iteration_start: { properties: { iteration }, required: ['iteration'] },
  iteration_end: { properties: { iteration, stop_reason: str, tool_calls: count }, required: ['iteration'] },
  agent_thinking: { properties: { iteration, text: str }, required: ['text'] },
  agent_response: { properties: { iteration, text: str }, required: ['text'] },
  current_status: { properties: { text: str } },
  tool_call: { properties: { iteration, tool: str, tool_use_id: str, input: { type: 'object' } }, required: ['tool'] },
  tool_result: { properties: { iteration, tool: str, tool_use_id: str, is_error: { type: 'boolean' } }, required: ['tool'] },
  compaction_start: { properties: { context_tokens: count, max_context_tokens: count, messages: count } },
  compaction_end: { properties: { messages_before: count, messages_after: count, context_tokens: count, summary_chars: count } },
  step_status: { properties: { text: str } },
  progress_status: { properties: { iteration, input_tokens: count, output_tokens: count, context_tokens: count } },
  file_change: {
    properties: { iteration, path: { type: 'string', minLength: 1 }, action: { enum: ['created', 'modified', 'deleted'] }, size: count },
    required: ['path'],
  },
}

export const AGENT_EVENT_SCHEMAS: Record<AgentEventType, Schema> = Object.fromEntries(
  AGENT_EVENT_TYPES.map((t): [string, Schema] => [t, {
    type: 'object',
    properties: { type: { const: t }, ...FIELDS[t].properties },
    required: ['type', ...(FIELDS[t].required ?? [])],
    additionalProperties: true,
  }]),
) as Record<AgentEventType, Schema>

const require = createRequire(import.meta.url)
let builtin: Map<string, ValidateFunction> | undefined
/** Compiled at the first agent event, not at import: an idle server holds no ajv for them. */
function builtinValidators(): Map<string, ValidateFunction> {
  if (!builtin) {
    const { Ajv } = require('ajv') as typeof import('ajv')
    const ajv = new Ajv({ allErrors: true, strict: true })
    builtin = new Map(AGENT_EVENT_TYPES.map((t) => [t, ajv.compile(AGENT_EVENT_SCHEMAS[t])]))
  }
  return builtin
}

/** Field messages (`/path: message`) when the body breaks its type's schema; undefined when valid. */
export function agentEventErrors(type: AgentEventType, body: unknown): Record<string, string> | undefined {
  const validate = builtinValidators().get(type)!
  if (validate(body)) return undefined
  return fieldMessages(validate.errors as ErrorObject[], {})
}

function fieldMessages(errors: readonly ErrorObject[], fields: Record<string, string>): Record<string, string> {
  for (const e of errors) {
    const key = e.keyword === 'required' ? `/${String((e.params as { missingProperty: string }).missingProperty)}` : e.instancePath || '/'
    fields[key] ??= e.message ?? 'invalid'
  }
  return fields
}

// ---- packs' schemas (docs/workspaces.md "Agent events") ----------------------------------------
// A pack attached to the workspace's role may declare `agent_events`: per type, a JSON Schema the
// body must ALSO satisfy. They were checked at upload (src/packs/manifest.ts); here they are
// compiled once per pack content digest (the manifest is part of the content, so one digest means
// one set of schemas) and kept, so an event only runs compiled validators.

/** What a workspace's pack contributes to event validation. */
export interface PackEventSchemaSource {
  name: string
  /** The pack's content digest (`image_digest`): the cache key. */
  digest: string
  agent_events?: Partial<Record<AgentEventType, Record<string, unknown>>>
}

/** One attached pack's compiled schemas (only the types it declares). */
export interface PackEventValidators {
  readonly name: string
  readonly validators: ReadonlyMap<AgentEventType, ValidateFunction>
}

const compiled = new Map<string, ReadonlyMap<AgentEventType, ValidateFunction>>()
/** Digests kept; the oldest compiled set is dropped past it (re-uploads make new digests). */
const COMPILED_PACKS_KEPT = 256

/** The pack's validators, compiled on first use of its digest. Throws when a schema does not compile. */
export function packEventValidators(pack: PackEventSchemaSource): PackEventValidators {
  let validators = compiled.get(pack.digest)
  if (!validators) {
    const map = new Map<AgentEventType, ValidateFunction>()
    for (const [type, schema] of Object.entries(pack.agent_events ?? {})) {
      if (!TYPES.has(type) || !schema) continue
      // The same compiler (drafts, no external $ref) that accepted the schema at upload.
      const c = compileSchema(schema)
      if (!c.ok) throw new Error(`the agent_events schema for ${type} of pack ${pack.name} does not compile: ${c.message}`)
      map.set(type as AgentEventType, c.validate)
    }
    if (compiled.size >= COMPILED_PACKS_KEPT) compiled.delete(compiled.keys().next().value!)
    compiled.set(pack.digest, map)
    validators = map
  }
  return { name: pack.name, validators }
}

/** How many pack digests have compiled validators (tests: the hot path does not recompile). */
export function compiledPackCount(): number {
  return compiled.size
}

/**
 * Checks a body against corral's schema for its type and every attached pack's schema for it.
 * Field messages are merged (corral's first, then the packs' in attachment order; the first
 * message for a field wins); `packs` names the packs whose schema refused it.
 */
export function agentEventViolation(type: AgentEventType, body: unknown, packs: readonly PackEventValidators[] = []):
  { message: string; fields: Record<string, string>; packs: string[] } | undefined {
  const own = builtinValidators().get(type)!
  const fields: Record<string, string> = own(body) ? {} : fieldMessages(own.errors as ErrorObject[], {})
  const ownFailed = Object.keys(fields).length > 0
  const refusedBy: string[] = []
  for (const p of packs) {
    const validate = p.validators.get(type)
    if (!validate || validate(body)) continue
    refusedBy.push(p.name)
    fieldMessages(validate.errors as ErrorObject[], fields)
  }
  if (!ownFailed && refusedBy.length === 0) return undefined
  const whose = [...(ownFailed ? ['its schema'] : []), ...refusedBy.map((n) => `the schema of pack ${n}`)].join(' and ')
  return { message: `the ${type} event does not match ${whose}`, fields, packs: refusedBy }
}

const TYPES = new Set<string>(AGENT_EVENT_TYPES)
