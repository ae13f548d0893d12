// The state of one MCP exchange (one HTTP request to an MCP server) that the MCP phases share.
import type { McpServerPolicy } from '../../policy/index.js'
import type { LocalReply, PolicyDenial } from '../decision.js'

export interface McpExchange {
  server: McpServerPolicy
  /** The row fields of a batch's messages after the first (the request's own row is the first's). */
  batchRows: Record<string, unknown>[]
  /** The tools the body calls (allowed), once per call: per-tool budget counting. */
  tools: string[]
  /** A later phase's refusal (a budget, a limit) in JSON-RPC terms, once the body's requests are known. */
  replyFor?: (denial: PolicyDenial) => LocalReply | undefined
}
