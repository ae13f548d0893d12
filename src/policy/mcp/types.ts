// What the proxy asks an MCP server's policy, and what it answers (docs/policy.md "MCP servers").
import type { PolicyContext } from '../types.js'

/** One JSON-RPC message the agent sends that names a method: a request (with an id) or a notification. */
export interface McpCall {
  kind: 'request' | 'notification'
  method: string
  /** `params` as sent (undefined when absent). */
  params: unknown
}

/** Which deny reason an MCP refusal carries (the spec's closed list). */
export type McpDenyReason = 'no_match' | 'schema_violation' | 'policy_error'

export interface McpVerdict {
  allow: boolean
  /** The part of the server policy that decided: `tools/<name>`, `resources[N]`, `prompts/<name>`, `methods/<m>`, `lifecycle`, `list`, `default`. */
  rule: string
  reason?: McpDenyReason
  /** One line for the agent and the row; never argument values. */
  message?: string
  /** Schema errors (instance paths and messages), at most five. */
  errors?: string[]
  tool?: string
  resource?: string
  prompt?: string
}

/** The list results the proxy filters, by their result key. */
export type McpListKind = 'tools' | 'resources' | 'resourceTemplates' | 'prompts'

/** The compiled `mcp` block of an allow rule. Pure and frozen; never throws. */
export interface McpServerPolicy {
  /** The server's name in rows (`mcp.server`, else the rule's key). */
  readonly server: string
  decide(call: McpCall, context: PolicyContext): McpVerdict
  /** Whether an entry of a list result (a tool, resource, template or prompt object) is shown to the agent. */
  listed(kind: McpListKind, item: unknown): boolean
}
