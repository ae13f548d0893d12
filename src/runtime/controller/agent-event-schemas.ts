// Body schemas of the agent events (spec "Agent events": the proxy validates the body against the
// workspace's agent event schemas). corral's own schemas, one per type of the closed enum: each
// names the fields the control plane and the people's views rely on (task_end's `status` completes
// the task; iteration numbers, tool names and file paths are what the live views show) and leaves
// every other field open, because `detail` is otherwise opaque and other agents may add their own.
// Documented in docs/workspaces.md ("Agent events").
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
import { AGENT_EVENT_TYPES, type AgentEventType } from '../../audit/event.js'

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
    properties: { status: { enum: ['completed', 'failed'] }, summary: str, reason: str, iterations: count },
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

const ajv = new Ajv({ allErrors: true, strict: true })
const validators = new Map<string, ValidateFunction>(AGENT_EVENT_TYPES.map((t) => [t, ajv.compile(AGENT_EVENT_SCHEMAS[t])]))

/** Field messages (`/path: message`) when the body breaks its type's schema; undefined when valid. */
export function agentEventErrors(type: AgentEventType, body: unknown): Record<string, string> | undefined {
  const validate = validators.get(type)!
  if (validate(body)) return undefined
  const fields: Record<string, string> = {}
  for (const e of validate.errors as ErrorObject[]) {
    const key = e.keyword === 'required' ? `/${String((e.params as { missingProperty: string }).missingProperty)}` : e.instancePath || '/'
    fields[key] ??= e.message ?? 'invalid'
  }
  return fields
}
