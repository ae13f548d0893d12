// Helpers every translator uses, so the events of every kind are cut and shaped like the
// reference agent's (docs/agent.md "Events out"): tool inputs with strings over 2,000 characters
// cut, tool outputs to their first 2,000 characters with `truncated`.
import type { AgentEvent } from '../event-sink.js'

export const EVENT_TEXT_CAP = 2000

/** A tool input for a `tool_call` event: every string longer than the cap is cut (nested too). */
export function cutInput(input: unknown): Record<string, unknown> {
  const cut = (v: unknown): unknown => {
    if (typeof v === 'string') return v.length > EVENT_TEXT_CAP ? `${v.slice(0, EVENT_TEXT_CAP)}…` : v
    if (Array.isArray(v)) return v.map(cut)
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, cut(x)]))
    return v
  }
  return input && typeof input === 'object' && !Array.isArray(input) ? (cut(input) as Record<string, unknown>) : { value: cut(input) }
}

/** The text of a tool result given as a string or as content blocks (`[{type: 'text', text}]`). */
export function resultText(content: unknown): string {
  if (typeof content === 'string') return content
  if (Array.isArray(content)) return content.map((b) => (b && typeof b === 'object' && typeof (b as { text?: unknown }).text === 'string' ? (b as { text: string }).text : '')).join('')
  if (content === undefined || content === null) return ''
  return JSON.stringify(content)
}

/** A `tool_result` event with the output cut like the reference agent's. */
export function toolResultEvent(f: { iteration: number; tool_use_id: string; tool: string; is_error: boolean; output: string; duration_ms?: number }): AgentEvent {
  return {
    type: 'tool_result', iteration: f.iteration, tool_use_id: f.tool_use_id, tool: f.tool, is_error: f.is_error,
    output: f.output.slice(0, EVENT_TEXT_CAP), truncated: f.output.length > EVENT_TEXT_CAP,
    ...(f.duration_ms !== undefined ? { duration_ms: f.duration_ms } : {}),
  }
}

/** JSON of one output line, or undefined when the line is not a JSON object (a CLI's stray log line). */
export function parseLine(text: string): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(text) as unknown
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined
  } catch {
    return undefined
  }
}
