// What the proxy says to an agent it refused (the `message` of its 403 body, src/proxy/decision.ts):
// vocabulary both sides read — the proxy writes it, and an agent kind's adapter recognises it in
// what a CLI printed, so a model call the proxy denied is named as such (docs/agent.md).
import type { DenyReason } from './audit-vocabulary.js'

/** One sentence per reason, addressed to the agent that got the 403. */
export const DENY_MESSAGES: Readonly<Record<DenyReason, string>> = Object.freeze({
  no_scheme: 'HTTPS is required: send the request through the proxy with CONNECT (HTTPS_PROXY), not as plain HTTP.',
  no_token: 'No capability token: set Proxy-Authorization: Bearer <token>.',
  invalid_token: 'The capability token is invalid or expired.',
  workspace_not_activated: 'The workspace named by the token is not known to this proxy or is not running.',
  workspace_gone: 'The workspace was stopped while this request was in flight.',
  no_policy: 'The workspace role has no capability policy; every outbound request is refused.',
  policy_error: 'The capability policy failed to evaluate.',
  policy_empty: 'The capability policy produced no result for this request.',
  policy_type_error: 'The capability policy produced a result of an unexpected shape.',
  no_match: 'No allow rule of the capability policy matches this request.',
  invalid_json: 'The request body is not valid JSON.',
  format_mismatch: "The request's Content-Type does not match the rule's request_format.",
  schema_violation: "The request body does not satisfy the rule's request_schema.",
  budget_exhausted: 'A budget counter reached its ceiling.',
  concurrency_exhausted: 'A budget counter reached its max_concurrent in-flight limit.',
  internal_error: 'The proxy failed internally while handling this request.',
  destination_private: 'The destination resolves to a loopback, private, link-local or control-plane address that no rule names.',
  path_ambiguous: 'The request path has no single canonical form (encoded slash, backslash, dot segments above the root, or bad percent-encoding).',
  audit_unavailable: 'The audit log cannot record this request right now; nothing was forwarded. Retry later.',
  limit_exceeded: "A resource limit of the proxy for this workspace was reached (connections, in-flight requests, header or body size).",
})


/** The deny reason whose message `text` contains, if any. */
export function denyReasonIn(text: string): DenyReason | undefined {
  for (const [reason, message] of Object.entries(DENY_MESSAGES)) if (text.includes(message)) return reason as DenyReason
  return undefined
}
