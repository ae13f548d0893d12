// Public types of the caps.yaml compiler (spec: control-plane.md, "Capability policy document").
// The proxy codes against these; keep them stable. Everything a CompiledPolicy hands out is frozen
// and every evaluator is pure: no parsing or compiling happens on the hot path, and evaluation
// failures come back as data (deny reasons, transforms_failed values, floored reasons), never throws.

import type { DenyReason, FlooredReason, TransformFailure } from '../contract/index.js'

export type Severity = 'error' | 'warning'

/** One finding about a caps.yaml document. `path` is a JSON Pointer (RFC 6901) into the document. */
export interface Diagnostic {
  severity: Severity
  /** Stable code, documented in docs/caps-rules.md. */
  code: string
  message: string
  path: string
  /** 1-based line and column of the offending node (for a missing key: the map that should hold it). */
  line: number
  column: number
  /** The check that produced it (SARIF rule id); equals `code`. */
  rule?: string
}

/** A half-compiled policy is unrepresentable: either a policy, or errors. */
export type CompileResult =
  | { ok: true; policy: CompiledPolicy; diagnostics: readonly Diagnostic[] }
  | { ok: false; diagnostics: readonly Diagnostic[] }

export interface CompileOptions {
  /** File name for diagnostics only. */
  file?: string
}

// ---------------------------------------------------------------------------------------------
// Requests and context handed to the evaluators

/** Header values as received; repeated headers may be given as arrays. Names must be lowercase. */
export type HeaderMap = Readonly<Record<string, string | readonly string[]>>

export interface PolicyRequest {
  /** Uppercase verb. */
  method: string
  scheme: 'http' | 'https'
  /** Hostname, any case, with or without a port (`api.example.com:8443`). */
  host: string
  /** Path without the query string, starting with `/`. */
  path: string
  /** Query as on the wire, without the leading `?` ('' when none). */
  rawQuery: string
  headers: HeaderMap
}

export interface PolicyContext {
  workspace?: { id: string; org_id: string; role: string; environment: string }
  task?: { id: string }
}

/** Synchronous secret lookup for transforms; undefined when the secret does not exist. */
export type SecretLookup = (name: string) => string | undefined

// ---------------------------------------------------------------------------------------------
// Admission (request_headers phase)

/** Which allow rule of which capability matched. */
export interface RuleMatch {
  capability: string
  capabilityIndex: number
  /** Allow rule name, when the rule is named. */
  rule?: string
  ruleIndex: number
  /** `name` when set, otherwise `allow[N]`. */
  ruleKey: string
  /** The rule's `allow_private` CIDRs (normalized, sorted), when it names any. */
  allowPrivate?: readonly string[]
}

/** Why one allow rule did not match (detail.allowrule_eval). */
export interface AllowRuleEval {
  capability: string
  rule: string
  /** The first criterion that failed, in evaluation order. */
  failed: 'scheme' | 'domain' | 'method' | 'path' | 'match' | 'match_error' | 'format' | 'json' | 'schema'
  /** Short human detail (CEL error summary, schema errors); never request data beyond the criterion. */
  message?: string
}

export interface DenyDetail {
  allowrule_eval?: AllowRuleEval[]
  capability?: string
  rule?: string
  errors?: string[]
  message?: string
}

export interface Deny {
  decision: 'deny'
  reason: DenyReason
  detail: DenyDetail
}

export type AdmissionResult =
  | {
      decision: 'allow'
      match: RuleMatch
      /** True when the proxy must buffer the body and call checkBody (format, schema, body transforms, requires_body transforms). */
      needsBody: boolean
    }
  | {
      /** The first candidates depend on a body-matching CEL expression: buffer the body and call checkBody. */
      decision: 'pending'
      candidates: readonly RuleMatch[]
    }
  | Deny

// ---------------------------------------------------------------------------------------------
// Body phase

export interface BodyInput {
  request: PolicyRequest
  context: PolicyContext
  /** The raw request body, or undefined when the request has none. */
  body: Uint8Array | string | undefined
}

export type BodyResult =
  | {
      decision: 'allow'
      match: RuleMatch
      /** Parsed JSON body when the rule's request_format is application/json and a body was present. */
      json?: unknown
      /** Number of schema validations run (audit validations_applied). */
      validationsApplied: number
    }
  | (Deny & { validationsApplied: number })

// ---------------------------------------------------------------------------------------------
// Transforms

export interface TransformInput {
  match: RuleMatch
  request: PolicyRequest
  context: PolicyContext
  /** Parsed JSON body (from checkBody) when available. */
  json?: unknown
  /** True when the request carries a body (for body_absent). */
  hasBody?: boolean
  secrets: SecretLookup
  /**
   * False when secrets may not be used for this request (the proxy: Host differs from the CONNECT
   * target, or plain HTTP): transforms whose value reads `secrets` fail with auth_unavailable.
   * Default true.
   */
  secretsAllowed?: boolean
}

export interface AuthInjection {
  credential: string
  provider: string
  /** transforms_failed / auth_failures key of this transform: its name or `transform[N]`. */
  key: string
}

export interface TransformOutput {
  method: string
  path: string
  rawQuery: string
  /** Lowercased names; repeated values kept apart. */
  headers: Record<string, string[]>
  /** Present when a body transform changed the JSON body. */
  json?: unknown
  bodyChanged: boolean
  /** Count of transforms fired (audit transforms_applied); auth transforms count once injected by the proxy. */
  applied: number
  appliedKeys: string[]
  failed: Record<string, TransformFailure>
  /** Credential injections the proxy must perform (placement from auth-providers.ts). */
  auth: AuthInjection[]
  /** Values placed from `secrets[...]` (the secrets and the values built from them), to scrub from the response. */
  injected: string[]
}

// ---------------------------------------------------------------------------------------------
// Counters

export type CounterSource = 'request.count' | 'request.bytes' | 'response.bytes' | 'response' | 'websocket.messages' | 'websocket.bytes' | 'websocket.message' | 'mcp.calls'
/** Which WebSocket messages a websocket counter meters: the agent's, the upstream's, or both. */
export type MessageDirection = 'to_upstream' | 'to_agent' | 'both'

/** One WebSocket message as a `websocket.message` counter sees it (whole: the relay's bounded copy of its fragments). */
export interface MessageView {
  direction: 'to_upstream' | 'to_agent'
  /** Text (UTF-8) or binary. */
  text: boolean
  data: Buffer
}
export type Accumulator = 'max' | 'sum' | 'last'

export interface BudgetScope {
  /** 0 means unlimited. */
  max: number
  /** Milliseconds; undefined means never resets. */
  ttlMs?: number
  /** The duration as written. */
  ttl?: string
}

export interface ResponseView {
  status: number
  /** Lowercased names. */
  headers: HeaderMap
  /** Bytes observed on the wire so far (or in total). */
  size: number
}

export interface CounterValue {
  /** Integer amount to debit (already floored to failure_charge where that applies). */
  value: number
  floored?: FlooredReason
}

/** Incremental SSE metering of one response stream. */
export interface SseMeter {
  /** Feed raw bytes (or text) as they arrive. */
  feed(chunk: Uint8Array | string): void
  /** True once the terminator was seen. */
  readonly terminated: boolean
  /** Ends the stream: accumulated value, floored with failure_charge when the terminator was not seen or extraction failed. */
  end(): CounterValue
}

export interface CompiledCounter {
  readonly name: string
  readonly capability: string
  readonly source: CounterSource
  /** 'headers' for source response without body, 'body' for body counters, 'request' for request.*, 'bytes' for response.bytes. */
  readonly phase: 'request' | 'response_headers' | 'response_body' | 'websocket'
  /** websocket.* counters: which messages they meter. */
  readonly direction?: MessageDirection
  readonly framing?: 'single_document' | 'sse'
  readonly accumulator?: Accumulator
  readonly workspace?: BudgetScope
  readonly task?: BudgetScope
  readonly reservePerRequest: number
  readonly failureCharge: number
  readonly maxConcurrent: number
  readonly statusCodes: readonly string[]
  /** Whether this counter counts a response with this status. request.* counters always do. */
  matchesStatus(status: number): boolean
  /** request.count → 1, request.bytes → bodyBytes, mcp.calls → the request's tools/call messages (of its `tools`); 0 for response sources. */
  requestAmount(bodyBytes: number, mcpTools?: readonly string[]): number
  /** response.bytes → size; response headers counter → its CEL value (floored on error). */
  fromResponseHeaders(response: ResponseView): CounterValue
  /** single_document body counters: checks framing/format/encoding, parses JSON, evaluates value. */
  fromDocument(response: ResponseView, body: Uint8Array | string): CounterValue
  /** SSE body counters: an incremental meter; framing/format/encoding are checked from the response headers. */
  meter(response: ResponseView): SseMeter
  /** websocket.* counters: the amount one relayed message adds (0 when its direction is not metered), or why its `value` could not be evaluated. */
  fromMessage(message: MessageView): number | 'parse_failed' | 'cel_eval_error'
}

// ---------------------------------------------------------------------------------------------
// The compiled policy

export interface CompiledCapabilityInfo {
  readonly name: string
  readonly rules: readonly { name?: string; key: string; domains: readonly string[]; methods: readonly string[]; paths: readonly string[] }[]
  readonly counters: readonly CompiledCounter[]
  /** Credential names the capability's auth transforms name, sorted, once each. */
  readonly credentials: readonly string[]
  /** Secret names its transforms read (`secrets["name"]`), sorted, once each. */
  readonly secrets: readonly string[]
}

export interface CompiledPolicy {
  /** sha256 of the source text. */
  readonly hash: string
  readonly capabilities: readonly CompiledCapabilityInfo[]
  /** Static match + admission CEL, in document order. */
  admit(request: PolicyRequest, context: PolicyContext): AdmissionResult
  /** Body phase for an allow with needsBody, or a pending admission. */
  checkBody(admission: Exclude<AdmissionResult, Deny>, input: BodyInput): BodyResult
  /** Request transforms applicable to the matched rule, in document order. */
  applyTransforms(input: TransformInput): TransformOutput
  /** Budget counters of a capability (empty when none). */
  counters(capability: string): readonly CompiledCounter[]
  /**
   * The `passthrough: true` rule naming a CONNECT target (`host`, with `:port` unless 443), first
   * in document order; undefined when none does (the tunnel is intercepted).
   */
  passthrough(host: string): RuleMatch | undefined
  /** The MCP server policy of a matched rule (its `mcp` block), when it has one. */
  mcp(match: RuleMatch): McpServerPolicy | undefined
}

// ---------------------------------------------------------------------------------------------
// MCP servers (an allow rule's `mcp` block): what the proxy asks, and what it answers

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
