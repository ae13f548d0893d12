// The catalogue of caps.yaml diagnostic codes. Codes are stable wire names (JSON output, SARIF rule
// ids, CI annotations); each one is documented in docs/caps-rules.md with the bad and good
// documents below, and test/policy/codes.test.ts proves every bad example raises its code and
// every good example does not.

import type { Severity } from './types.js'

export interface CodeInfo {
  severity: Severity
  title: string
  bad: string
  good: string
}

const OK = `- name: api
  type: http
  allow:
    - domains: [api.example.com]
      methods: [GET]
`

function doc(allowExtra: string, capExtra = ''): string {
  return `- name: api
  type: http
  allow:
    - domains: [api.example.com]
      methods: [POST]
      paths: [/v1/items]
${allowExtra}${capExtra}`
}

const SSE_COUNTER = `      - name: tokens
        source: response
        requires_body: true
        framing: sse
        format: application/json
        encoding: identity
        status_codes: ["2xx"]
        accumulator: max
        value: int(event.data.usage.output_tokens)
`
const L10 = '[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]'
const IDENTITY = `  transforms:
    - header: {name: Accept-Encoding, action: set, value: '"identity"'}
`

export const CODES = {
  document_too_large: { severity: 'error', title: 'The document exceeds 1 MiB.', bad: '# a 2 MiB file', good: OK },
  document_too_complex: {
    severity: 'error',
    title: 'Aliases expand beyond the node budget (YAML bomb) or nesting is too deep.',
    bad: `- &a [x, x, x, x, x, x, x, x, x]\n- &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n# …and so on, ten levels deep\n`,
    good: OK,
  },
  yaml_syntax: { severity: 'error', title: 'The text is not valid YAML.', bad: `- name: api\n  type: [http\n`, good: OK },
  not_a_list: { severity: 'error', title: 'The document must be a YAML list of capabilities.', bad: `name: api\ntype: http\n`, good: OK },
  invalid_type: { severity: 'error', title: 'A field has the wrong YAML type.', bad: doc('      allow_insecure: "yes"\n'), good: doc('      allow_insecure: true\n') },
  unknown_key: { severity: 'error', title: 'A key that the schema does not define.', bad: doc('      method: [GET]\n'), good: doc('') },
  duplicate_key: { severity: 'error', title: 'A key appears twice in the same mapping.', bad: doc('      paths: [/v2]\n'), good: doc('') },
  missing_key: {
    severity: 'error',
    title: 'A required key is missing (reported on the mapping that should hold it).',
    bad: `- name: api\n  type: http\n  allow:\n    - domains: [api.example.com]\n`,
    good: OK,
  },
  field_rejected: {
    severity: 'error',
    title: 'A key that is not allowed in this context (for example `value` on a header `remove`, or `failure_charge` on a synchronous counter).',
    bad: doc('', `  transforms:\n    - header: {name: X-Debug, action: remove, value: '"1"'}\n`),
    good: doc('', `  transforms:\n    - header: {name: X-Debug, action: remove}\n`),
  },
  invalid_enum: { severity: 'error', title: 'A value outside its closed enum (type, action, source, accumulator, framing…).', bad: OK.replace('type: http', 'type: grpc'), good: OK },
  invalid_number: {
    severity: 'error',
    title: 'A number that must be a non-negative int64 is negative, fractional or not a number.',
    bad: doc('', `  budgets:\n    counters:\n      - {name: calls, source: request.count, workspace: {max: -1}}\n`),
    good: doc('', `  budgets:\n    counters:\n      - {name: calls, source: request.count, workspace: {max: 100}}\n`),
  },
  invalid_name: { severity: 'error', title: 'A capability or counter name does not match `[A-Za-z][A-Za-z0-9_-]{0,63}`.', bad: OK.replace('name: api', 'name: 1api'), good: OK },
  reserved_name: { severity: 'error', title: 'Names with a leading underscore are reserved for the platform.', bad: OK.replace('name: api', 'name: _api'), good: OK },
  duplicate_name: {
    severity: 'error',
    title: 'Capability names are unique in the document; allow rule, transform and counter names are unique within their capability.',
    bad: OK + OK,
    good: OK + OK.replace('name: api', 'name: api2'),
  },
  empty_list: { severity: 'error', title: 'A list that needs at least one entry is empty (allow, domains, methods, status_codes).', bad: OK.replace('methods: [GET]', 'methods: []'), good: OK },
  invalid_domain: { severity: 'error', title: 'A domain pattern is not a hostname glob (see docs/policy.md).', bad: OK.replace('api.example.com', 'https://api.example.com/'), good: OK },
  invalid_cidr: {
    severity: 'error',
    title: 'An `allow_private` entry is not an IP address or CIDR range (names are not allowed; see docs/policy.md "Destinations").',
    bad: OK.replace('      methods: [GET]', '      methods: [GET]\n      allow_private: [internal.example.com]'),
    good: OK.replace('      methods: [GET]', '      methods: [GET]\n      allow_private: ["10.20.0.0/16"]'),
  },
  invalid_path: { severity: 'error', title: 'A path pattern must start with `/` and be a valid glob.', bad: doc('').replace('/v1/items', 'v1/items'), good: doc('') },
  invalid_method: { severity: 'error', title: 'Methods are uppercase and one of GET, POST, PUT, DELETE, PATCH, HEAD, OPTIONS.', bad: OK.replace('[GET]', '[get]'), good: OK },
  unknown_rule_reference: {
    severity: 'error',
    title: '`applies_to` names an allow rule that does not exist in the capability.',
    bad: doc('', `  transforms:\n    - applies_to: [chat]\n      header: {name: X-Team, action: set, value: '"core"'}\n`),
    good: doc('      name: chat\n', `  transforms:\n    - applies_to: [chat]\n      header: {name: X-Team, action: set, value: '"core"'}\n`),
  },
  request_format_required: {
    severity: 'error',
    title: 'A rule whose body is read (schema, body-matching CEL, body transform) must declare `request_format: application/json`.',
    bad: doc(`      match: {expr: 'request.body.model == "small"', requires_body: true}\n`),
    good: doc(`      request_format: application/json\n      match: {expr: 'request.body.model == "small"', requires_body: true}\n`),
  },
  invalid_schema: {
    severity: 'error',
    title: '`request_schema` is not a valid JSON Schema (or its JSON literal does not parse).',
    bad: doc(`      request_format: application/json\n      request_schema: {type: objekt}\n`),
    good: doc(`      request_format: application/json\n      request_schema: {type: object}\n`),
  },
  external_ref: {
    severity: 'error',
    title: '`request_schema` uses a `$ref` outside the schema itself.',
    bad: doc(`      request_format: application/json\n      request_schema: {$ref: "https://example.com/s.json"}\n`),
    good: doc(`      request_format: application/json\n      request_schema: {$defs: {s: {type: object}}, $ref: "#/$defs/s"}\n`),
  },
  transform_variant: {
    severity: 'error',
    title: 'A transform must carry exactly one of header, path, query, body, auth.',
    bad: doc('', `  transforms:\n    - header: {name: X-A, action: remove}\n      query: {key: debug, action: remove}\n`),
    good: doc('', `  transforms:\n    - header: {name: X-A, action: remove}\n    - query: {key: debug, action: remove}\n`),
  },
  invalid_direction: {
    severity: 'error',
    title: 'Transforms run on requests only; `direction: response` is rejected.',
    bad: doc('', `  transforms:\n    - direction: response\n      header: {name: X-A, action: remove}\n`),
    good: doc('', `  transforms:\n    - direction: request\n      header: {name: X-A, action: remove}\n`),
  },
  invalid_header_name: {
    severity: 'error',
    title: 'A header name is not an RFC 7230 token.',
    bad: doc('', `  transforms:\n    - header: {name: "X Team", action: set, value: '"a"'}\n`),
    good: doc('', `  transforms:\n    - header: {name: X-Team, action: set, value: '"a"'}\n`),
  },
  invalid_regex: {
    severity: 'error',
    title: 'A path transform `pattern` is not a valid RE2 expression (backreferences and lookaround are not RE2).',
    bad: doc('', `  transforms:\n    - path: {action: replace, pattern: '^/(?=v1)', value: '"/b"'}\n`),
    good: doc('', `  transforms:\n    - path: {action: replace, pattern: '^/v1/', value: '"/v2/"'}\n`),
  },
  unknown_provider: {
    severity: 'error',
    title: 'An auth transform names a provider that is not in the closed list (src/policy/auth-providers.ts).',
    bad: doc('', `  transforms:\n    - auth: {credential: gh, provider: githubb}\n`),
    good: doc('', `  transforms:\n    - auth: {credential: gh, provider: github}\n`),
  },
  body_requires_schema: {
    severity: 'error',
    title: 'A header, query or path transform with `requires_body: true` needs a `request_schema` on every rule it applies to.',
    bad: doc(`      request_format: application/json\n`, `  transforms:\n    - requires_body: true\n      header: {name: X-Model, action: set, value: 'string(request.body.model)'}\n`),
    good: doc(`      request_format: application/json\n      request_schema: {type: object}\n`, `  transforms:\n    - requires_body: true\n      header: {name: X-Model, action: set, value: 'string(request.body.model)'}\n`),
  },
  cel_syntax: { severity: 'error', title: 'A CEL expression does not parse.', bad: doc(`      match: {expr: 'request.method ==' }\n`), good: doc(`      match: {expr: 'request.method == "POST"'}\n`) },
  cel_undeclared: {
    severity: 'error',
    title: 'A CEL expression references a variable its phase does not declare (`undeclared reference: <name>`).',
    bad: doc(`      match: {expr: 'request.body.stream == false'}\n`),
    good: doc(`      match: {expr: 'request.headers["x-team"] == "core"'}\n`),
  },
  cel_type: { severity: 'error', title: 'A CEL expression does not type-check.', bad: doc(`      match: {expr: 'request.method + 1 == 2'}\n`), good: doc(`      match: {expr: 'size(request.method) == 4'}\n`) },
  cel_result_type: {
    severity: 'error',
    title: 'A CEL expression produces the wrong type for its site (bool for match/terminal_cel, string for header/query/path values, map for body merge, number for counters).',
    bad: doc(`      match: {expr: 'request.method'}\n`),
    good: doc(`      match: {expr: 'request.method == "POST"'}\n`),
  },
  cel_secrets_dynamic_key: {
    severity: 'error',
    title: '`secrets` indexed with anything but a string literal.',
    bad: doc('', `  transforms:\n    - header: {name: X-Key, action: set, value: 'secrets[request.method]'}\n`),
    good: doc('', `  transforms:\n    - header: {name: X-Key, action: set, value: 'secrets["api_key"]'}\n`),
  },
  cel_secrets_not_allowed: {
    severity: 'error',
    title: '`secrets` used where the phase has no secrets (match expressions, path transforms, counters).',
    bad: doc('', `  transforms:\n    - path: {action: prefix, value: 'secrets["tenant"]'}\n`),
    good: doc('', `  transforms:\n    - path: {action: prefix, value: '"/tenant"'}\n`),
  },
  cel_invalid_regex: {
    severity: 'error',
    title: 'A literal pattern given to `matches()` is not valid RE2.',
    bad: doc(`      match: {expr: 'request.path.matches("^/(?=v1)")'}\n`),
    good: doc(`      match: {expr: 'request.path.matches("^/v1/")'}\n`),
  },
  cel_cost_exceeded: {
    severity: 'error',
    title:
      'An expression\'s worst-case cost (AST nodes evaluated, times comprehension iterations, plus the size of what each operation touches; inputs taken at 1,024 elements or characters) exceeds 50,000 units, or the policy\'s expressions together exceed 100,000 (docs/policy.md "Cost limits").',
    bad: doc(`      match: {expr: '${L10}.all(a, ${L10}.all(b, ${L10}.all(c, ${L10}.all(d, a + b + c + d >= 0))))'}\n`),
    good: doc(`      match: {expr: '${L10}.all(a, ${L10}.all(b, a + b >= 0))'}\n`),
  },
  invalid_status_codes: {
    severity: 'error',
    title: 'A `status_codes` entry is not an exact code (`200`), a range (`200-299`) or a family (`2xx`) within 100–599.',
    bad: doc('', `  budgets:\n    counters:\n      - {name: out, source: response.bytes, status_codes: ["600"], workspace: {max: 1000000}}\n` + IDENTITY),
    good: doc('', `  budgets:\n    counters:\n      - {name: out, source: response.bytes, status_codes: ["2xx"], workspace: {max: 1000000}}\n` + IDENTITY),
  },
  terminator_count: {
    severity: 'error',
    title: 'An SSE body counter needs exactly one of terminal_event_type, terminal_sentinel, terminal_cel.',
    bad: doc('', `  budgets:\n    counters:\n${SSE_COUNTER}` + IDENTITY),
    good: doc('', `  budgets:\n    counters:\n${SSE_COUNTER}        terminal_event_type: message_stop\n` + IDENTITY),
  },
  accept_encoding_required: {
    severity: 'error',
    title: 'A capability with a body-reading response counter must set `Accept-Encoding` to the CEL literal `"identity"` with a header transform.',
    bad: doc('', `  budgets:\n    counters:\n${SSE_COUNTER}        terminal_event_type: message_stop\n`),
    good: doc('', `  budgets:\n    counters:\n${SSE_COUNTER}        terminal_event_type: message_stop\n` + IDENTITY),
  },
  invalid_duration: {
    severity: 'error',
    title: 'A BudgetScope `ttl` is not a positive duration such as `90s`, `5m`, `1h30m`, `24h`.',
    bad: doc('', `  budgets:\n    counters:\n      - {name: calls, source: request.count, workspace: {max: 10, ttl: 0s}}\n`),
    good: doc('', `  budgets:\n    counters:\n      - {name: calls, source: request.count, workspace: {max: 10, ttl: 1h}}\n`),
  },
  scope_order: {
    severity: 'error',
    title: 'When both scopes are set, the task scope may not exceed the workspace scope (max and ttl).',
    bad: doc('', `  budgets:\n    counters:\n      - {name: calls, source: request.count, workspace: {max: 10}, task: {max: 20}}\n`),
    good: doc('', `  budgets:\n    counters:\n      - {name: calls, source: request.count, workspace: {max: 20}, task: {max: 10}}\n`),
  },
  failure_charge_exceeds_max: {
    severity: 'error',
    title: '`failure_charge` may not exceed a scope `max`.',
    bad: doc('', `  budgets:\n    counters:\n      - {name: out, source: response.bytes, status_codes: ["2xx"], failure_charge: 500, workspace: {max: 100}}\n` + IDENTITY),
    good: doc('', `  budgets:\n    counters:\n      - {name: out, source: response.bytes, status_codes: ["2xx"], failure_charge: 50, workspace: {max: 100}}\n` + IDENTITY),
  },
  unrestricted_write: {
    severity: 'warning',
    title: 'An allow rule admits a write method (POST, PUT, PATCH, DELETE) on every path; list the endpoints in `paths`.',
    bad: OK.replace('[GET]', '[GET, POST]'),
    good: doc(''),
  },
  counter_never_fires: {
    severity: 'warning',
    title: 'A counter can never limit anything: no scope max, no max_concurrent, or only 1xx status codes.',
    bad: doc('', `  budgets:\n    counters:\n      - {name: calls, source: request.count}\n`),
    good: doc('', `  budgets:\n    counters:\n      - {name: calls, source: request.count, workspace: {max: 1000}}\n`),
  },
  substitution_backreference: {
    severity: 'warning',
    title: 'A path `replace` value looks like a backreference (`$1`, `\\1`); substitutions are literal.',
    bad: doc('', `  transforms:\n    - path: {action: replace, pattern: '^/v1/(.*)', value: '"/v2/$1"'}\n`),
    good: doc('', `  transforms:\n    - path: {action: replace, pattern: '^/v1/', value: '"/v2/"'}\n`),
  },
  no_capabilities: {
    severity: 'warning',
    title: 'The document is an empty list: a workspace with this policy can reach nothing.',
    bad: '[]\n',
    good: OK,
  },
  broad_private_range: {
    severity: 'warning',
    title: 'An `allow_private` range is wider than /8 (IPv4) or /16 (IPv6): it opens most private addresses to the rule\'s hosts.',
    bad: OK.replace('      methods: [GET]', '      methods: [GET]\n      allow_private: ["0.0.0.0/0"]'),
    good: OK.replace('      methods: [GET]', '      methods: [GET]\n      allow_private: ["10.20.0.0/16"]'),
  },
  mcp_name_not_canonical: {
    severity: 'error',
    title: 'An MCP tool, prompt or resource name is empty or not in NFKC form; names are matched exactly, so a policy names each one as the server spells it.',
    bad: `- name: tools
  type: http
  allow:
    - name: mcp
      domains: [mcp.example.com]
      methods: [POST, GET, DELETE]
      paths: [/mcp]
      mcp:
        tools:
          - name: ｓearch
`,
    good: `- name: tools
  type: http
  allow:
    - name: mcp
      domains: [mcp.example.com]
      methods: [POST, GET, DELETE]
      paths: [/mcp]
      mcp:
        tools:
          - name: search
`,
  },
  mcp_rule_shadowed: {
    severity: 'warning',
    title: 'An earlier allow rule without `mcp` admits POSTs to an MCP rule\'s host and path: the first matching rule decides, so those MCP messages would pass undecided.',
    bad: `- name: api
  type: http
  allow:
    - domains: [mcp.example.com]
      methods: [GET, POST]
- name: tools
  type: http
  allow:
    - domains: [mcp.example.com]
      methods: [POST]
      paths: [/mcp]
      mcp:
        tools:
          - name: search
`,
    good: `- name: api
  type: http
  allow:
    - domains: [mcp.example.com]
      methods: [GET, POST]
      paths: [/v1/*]
- name: tools
  type: http
  allow:
    - domains: [mcp.example.com]
      methods: [POST]
      paths: [/mcp]
      mcp:
        tools:
          - name: search
`,
  },
  mcp_name_not_ascii: {
    severity: 'warning',
    title: 'An MCP tool, prompt or resource name has characters outside printable ASCII: an exact match only, so a look-alike spelling on the wire is another name.',
    bad: `- name: tools
  type: http
  allow:
    - name: mcp
      domains: [mcp.example.com]
      methods: [POST, GET, DELETE]
      paths: [/mcp]
      mcp:
        tools:
          - name: sеarch
`,
    good: `- name: tools
  type: http
  allow:
    - name: mcp
      domains: [mcp.example.com]
      methods: [POST, GET, DELETE]
      paths: [/mcp]
      mcp:
        tools:
          - name: search
`,
  },
  passthrough_conflict: {
    severity: 'error',
    title: 'A `passthrough: true` rule names something the proxy could only enforce by decrypting (methods, paths, match, request_format, request_schema, allow_insecure), or its capability has transforms or credentials.',
    bad: `- name: pinned\n  type: http\n  allow:\n    - domains: [pinned.example.com]\n      passthrough: true\n      methods: [GET]\n`,
    good: `- name: pinned\n  type: http\n  allow:\n    - domains: [pinned.example.com]\n      passthrough: true\n`,
  },
  match_all_domain: {
    severity: 'warning',
    title: 'A domain pattern matches every host (`*`, `**`).',
    bad: OK.replace('[api.example.com]', '["**"]'),
    good: OK,
  },
} as const satisfies Record<string, CodeInfo>

export type Code = keyof typeof CODES
