// `caps test`: policy unit tests. Each case is a request (plus optional context, secrets and a
// response) run through the same CompiledPolicy evaluators the proxy calls, compared field by
// field with its `expect` block. The cases file format is documented in docs/policy.md.

import { canonicalPath, targetPath } from './path.js'
import { isDeepStrictEqual } from 'node:util'
import { parse } from 'yaml'
import type { CompiledPolicy, CounterValue, HeaderMap, McpVerdict, PolicyContext, PolicyRequest, RuleMatch } from './types.js'
import { parseRpcBody } from './mcp/jsonrpc.js'

export interface CaseFailure {
  field: string
  expected: unknown
  actual: unknown
}

export interface CaseResult {
  name: string
  passed: boolean
  failures: CaseFailure[]
}

export interface CasesReport {
  passed: number
  failed: number
  cases: CaseResult[]
}

interface CaseSpec {
  name?: string
  request: { method?: string; url: string; headers?: Record<string, string | string[]>; body?: unknown }
  context?: PolicyContext
  secrets?: Record<string, string>
  response?: { status?: number; headers?: Record<string, string>; body?: unknown }
  expect: Record<string, unknown>
}

const EXPECT_KEYS = ['decision', 'reason', 'capability', 'rule', 'mcp_rule', 'headers', 'path', 'query', 'body', 'transforms_failed', 'transforms_applied', 'auth', 'debits', 'floored'] as const

export class CasesFileError extends Error {}

/** Parses a cases file: a list of cases or `{cases: [...]}`. Throws CasesFileError on bad shape. */
export function parseCases(text: string): CaseSpec[] {
  let doc: unknown
  try {
    doc = parse(text, { maxAliasCount: 100 })
  } catch (e) {
    throw new CasesFileError(`cases file is not valid YAML: ${(e as Error).message.split('\n')[0]}`)
  }
  const list = Array.isArray(doc) ? doc : doc && typeof doc === 'object' && Array.isArray((doc as { cases?: unknown }).cases) ? (doc as { cases: unknown[] }).cases : undefined
  if (!list) throw new CasesFileError('cases file must be a list of cases or a mapping with a "cases" list')
  return list.map((c, i) => {
    const where = `case ${i}`
    if (!c || typeof c !== 'object') throw new CasesFileError(`${where} must be a mapping`)
    const spec = c as CaseSpec
    if (!spec.request || typeof spec.request !== 'object' || typeof spec.request.url !== 'string') throw new CasesFileError(`${where} needs request.url`)
    if (!spec.expect || typeof spec.expect !== 'object') throw new CasesFileError(`${where} needs an expect block`)
    for (const k of Object.keys(spec.expect)) if (!(EXPECT_KEYS as readonly string[]).includes(k)) throw new CasesFileError(`${where}: unknown expect key "${k}" (expected ${EXPECT_KEYS.join(', ')})`)
    try {
      new URL(spec.request.url)
    } catch {
      throw new CasesFileError(`${where}: request.url ${JSON.stringify(spec.request.url)} is not an absolute URL`)
    }
    return spec
  })
}

function lowerHeaders(h: Record<string, string | string[]> | undefined): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {}
  for (const [k, v] of Object.entries(h ?? {})) out[k.toLowerCase()] = Array.isArray(v) ? v.map(String) : String(v)
  return out
}

function rawBody(body: unknown): string | undefined {
  if (body === undefined || body === null) return undefined
  return typeof body === 'string' ? body : JSON.stringify(body)
}

function debitsFor(policy: CompiledPolicy, capability: string, c: CaseSpec, requestBytes: number, mcpTools?: readonly string[]): { debits: Record<string, number>; floored: Record<string, string> } {
  const debits: Record<string, number> = {}
  const floored: Record<string, string> = {}
  const resp = c.response
  const body = rawBody(resp?.body) ?? ''
  const view = { status: resp?.status ?? 200, headers: lowerHeaders(resp?.headers) as HeaderMap, size: Buffer.byteLength(body) }
  for (const counter of policy.counters(capability)) {
    let v: CounterValue | undefined
    // WebSocket messages are not part of a case: those counters debit nothing here.
    if (counter.phase === 'websocket') continue
    if (counter.phase === 'request') v = { value: counter.requestAmount(requestBytes, mcpTools) }
    else if (!resp || !counter.matchesStatus(view.status)) continue
    else if (counter.phase === 'response_headers') v = counter.fromResponseHeaders(view)
    else if (counter.framing === 'single_document') v = counter.fromDocument(view, body)
    else {
      const meter = counter.meter(view)
      meter.feed(body)
      v = meter.end()
    }
    debits[counter.name] = v.value
    if (v.floored) floored[counter.name] = v.floored
  }
  return { debits, floored }
}

export function runCase(policy: CompiledPolicy, c: CaseSpec, index: number): CaseResult {
  const url = new URL(c.request.url)
  const headers = lowerHeaders(c.request.headers)
  const body = rawBody(c.request.body)
  if (body !== undefined && c.request.body !== null && typeof c.request.body === 'object' && headers['content-type'] === undefined) headers['content-type'] = 'application/json'
  // The proxy's canonical path (path.ts), not the URL parser's: the same refusals, the same form.
  const canonical = canonicalPath(targetPath(c.request.url) || '/')
  const request: PolicyRequest = {
    method: (c.request.method ?? 'GET').toUpperCase(),
    scheme: url.protocol === 'http:' ? 'http' : 'https',
    host: url.host,
    path: canonical.ok ? canonical.path : url.pathname,
    rawQuery: url.search.replace(/^\?/, ''),
    headers,
  }
  const context = c.context ?? {}
  const actual: Record<string, unknown> = {}

  let match: RuleMatch | undefined
  let json: unknown
  const adm = canonical.ok ? policy.admit(request, context) : ({ decision: 'deny', reason: 'path_ambiguous', detail: {} } as const)
  if (adm.decision === 'deny') Object.assign(actual, { decision: 'deny', reason: adm.reason })
  else if (adm.decision === 'allow' && !adm.needsBody) match = adm.match
  else {
    const b = policy.checkBody(adm, { request, context, body })
    if (b.decision === 'deny') Object.assign(actual, { decision: 'deny', reason: b.reason })
    else {
      match = b.match
      json = b.json
    }
  }
  const mcp = match ? mcpCase(policy, match, request, context, body) : undefined
  if (mcp) Object.assign(actual, mcp.actual)
  if (match && actual.decision !== 'deny') {
    Object.assign(actual, { decision: 'allow', capability: match.capability, rule: match.ruleKey })
    const secrets = c.secrets ?? {}
    const t = policy.applyTransforms({ match, request, context, json, hasBody: body !== undefined, secrets: (k) => (Object.hasOwn(secrets, k) ? secrets[k] : undefined) })
    const flatHeaders: Record<string, string | string[]> = {}
    for (const [k, v] of Object.entries(t.headers)) flatHeaders[k] = v.length === 1 ? v[0] : v
    Object.assign(actual, {
      headers: flatHeaders,
      path: t.path,
      query: t.rawQuery,
      body: t.json,
      transforms_failed: t.failed,
      transforms_applied: t.applied,
      auth: t.auth.map((a) => ({ credential: a.credential, provider: a.provider })),
      ...debitsFor(policy, match.capability, c, body === undefined ? 0 : Buffer.byteLength(body), mcp?.tools),
    })
  }

  const failures: CaseFailure[] = []
  for (const [key, expected] of Object.entries(c.expect)) {
    const got = actual[key]
    if (key === 'headers' && expected && typeof expected === 'object') {
      // Headers are checked as a subset: listed names must match; null means "absent".
      const gh = (got ?? {}) as Record<string, unknown>
      for (const [h, ev] of Object.entries(expected as Record<string, unknown>)) {
        const av = gh[h.toLowerCase()]
        if (ev === null ? av !== undefined : !isDeepStrictEqual(ev, av)) failures.push({ field: `headers.${h.toLowerCase()}`, expected: ev, actual: av ?? null })
      }
    } else if (!isDeepStrictEqual(expected, got ?? (key === 'transforms_failed' || key === 'debits' || key === 'floored' ? {} : null))) {
      failures.push({ field: key, expected, actual: got ?? null })
    }
  }
  return { name: c.name ?? `case ${index}`, passed: failures.length === 0, failures }
}

/**
 * A POST to a rule with an `mcp` block: its body's JSON-RPC messages decided as the proxy decides
 * them (the first refusal decides the case); `mcp_rule` is the part of the server policy that did.
 */
function mcpCase(policy: CompiledPolicy, match: RuleMatch, request: PolicyRequest, context: PolicyContext, body: string | undefined): { actual: Record<string, unknown>; tools: string[] } | undefined {
  const server = policy.mcp(match)
  if (!server || request.method !== 'POST') return undefined
  const parsed = parseRpcBody(body ?? '')
  if (!parsed.ok) return { actual: { decision: 'deny', reason: parsed.reason, capability: match.capability, rule: match.ruleKey }, tools: [] }
  let first: McpVerdict | undefined
  const tools: string[] = []
  for (const m of parsed.messages) {
    if (m.kind === 'response') continue
    const v = server.decide(m, context)
    first ??= v
    if (!v.allow) return { actual: { decision: 'deny', reason: v.reason ?? 'no_match', capability: match.capability, rule: match.ruleKey, mcp_rule: v.rule }, tools: [] }
    if (v.tool !== undefined) tools.push(v.tool)
  }
  // The tools called feed `mcp.calls` counters, as in the proxy.
  return { actual: first ? { mcp_rule: first.rule } : {}, tools }
}

export function runCases(policy: CompiledPolicy, cases: CaseSpec[]): CasesReport {
  const results = cases.map((c, i) => runCase(policy, c, i))
  const passed = results.filter((r) => r.passed).length
  return { passed, failed: results.length - passed, cases: results }
}
