// Our small CEL interface. `@marcbachmann/cel-js` is imported here and nowhere else, so the engine
// can be swapped (docs/policy.md). One environment per expression site
// (the spec's "CEL variables by phase" table); every expression is parsed and type-checked at
// save time; the hot path only calls a prebuilt program.
//
// Two deliberate deviations from the engine's defaults:
// - `matches()` would build a backtracking JS RegExp on every call. We rename every
//   `x.matches(p)` to an RE2-backed function (linear time; cel-re2.ts); literal patterns are
//   compiled at save time so a bad pattern is a diagnostic, not a runtime error.
// - `secrets` may only be indexed with string literals, so the proxy knows before evaluation
//   exactly which secrets an expression reads (and fetches only those).
// Every program also carries a worst-case cost bound and is metered when it runs (cel-cost.ts,
// cel-meter.ts).

import { Environment, type ASTNode } from '@marcbachmann/cel-js'
import { RE2_DYNAMIC, RE2_LITERAL, re2Error, rewriteMatches } from './cel-re2.js'
import { CEL_CALL_BUDGET, CEL_EXPR_COST_LIMIT, CEL_INPUT_BOUND, estimateCelCost } from './cel-cost.js'
import { assertCelBudget, celBudgetOpen, instrumentCel, withCelBudget } from './cel-meter.js'

/** Where an expression sits; decides the variables it may see. */
export type CelSite =
  | 'match_headers'
  | 'match_body'
  | 'transform_header'
  | 'transform_query'
  | 'transform_path'
  | 'transform_body'
  | 'counter_headers'
  | 'counter_document'
  | 'counter_sse'
  | 'counter_websocket'
  | 'terminal_cel'
  | 'mcp_call'

export type CelResultKind = 'bool' | 'string' | 'map' | 'number'

export interface CelSiteOptions {
  /** Transforms (header/query/path) opted into the body with requires_body plus a schema. */
  withBody?: boolean
  /** Extra object types and variables (an MCP call's `args`, typed from the tool's inputSchema); `key` identifies them. */
  declare?: CelDeclarations
}

/** Object types (name → field → CEL type) and variables (name → CEL type) added to a site's environment. */
export interface CelDeclarations {
  readonly key: string
  readonly types: readonly { readonly name: string; readonly fields: Readonly<Record<string, string>> }[]
  readonly vars: Readonly<Record<string, string>>
}

export interface CelIssue {
  code: 'cel_syntax' | 'cel_undeclared' | 'cel_type' | 'cel_result_type' | 'cel_secrets_dynamic_key' | 'cel_secrets_not_allowed' | 'cel_invalid_regex' | 'cel_cost_exceeded'
  message: string
}

/** A checked, ready-to-run expression. `run` throws on evaluation errors; callers map them to enums. */
export interface CelProgram {
  readonly source: string
  /** Statically inferred result type as reported by the checker (e.g. `bool`, `dyn`). */
  readonly type: string
  /** Secret names read by the expression (string-literal keys). */
  readonly secretKeys: readonly string[]
  /** Worst-case units of one evaluation (inputs within CEL_INPUT_BOUND; docs/policy.md "Cost limits"). */
  readonly cost: number
  /** False when the expression names no variable (a literal): it may run with no variables built. */
  readonly usesVars?: boolean
  /** Evaluates within the caller's `withCelBudget` scope, or a budget of its own; throws CelBudgetExceeded past it. */
  run(vars: Record<string, unknown>): unknown
}

export type CelCompileResult = { ok: true; program: CelProgram } | { ok: false; issues: CelIssue[] }

const SITE_VARS: Record<CelSite, { request?: 'plain' | 'body'; response?: 'plain' | 'body'; ctx?: boolean; secrets?: boolean; event?: boolean }> = {
  match_headers: { request: 'plain', ctx: true },
  match_body: { request: 'body', ctx: true },
  transform_header: { request: 'plain', ctx: true, secrets: true },
  transform_query: { request: 'plain', ctx: true, secrets: true },
  transform_path: { request: 'plain', ctx: true },
  transform_body: { request: 'body', ctx: true, secrets: true },
  counter_headers: { response: 'plain' },
  counter_document: { response: 'body' },
  counter_sse: { response: 'plain', event: true },
  counter_websocket: { event: true },
  terminal_cel: { response: 'plain', event: true },
  mcp_call: { ctx: true },
}

const SITE_LABEL: Record<CelSite, string> = {
  match_headers: 'allow rule match',
  match_body: 'allow rule match',
  transform_header: 'header transform',
  transform_query: 'query transform',
  transform_path: 'path transform',
  transform_body: 'body transform',
  counter_headers: 'counter value',
  counter_document: 'counter value',
  counter_sse: 'counter value',
  counter_websocket: 'counter value',
  terminal_cel: 'terminal_cel',
  mcp_call: 'MCP call condition',
}

const REQUEST_FIELDS = {
  method: 'string',
  path: 'string',
  host: 'string',
  scheme: 'string',
  headers: 'map<string, string>',
  raw_query: 'string',
  query: 'map<string, list<string>>',
} as const
const RESPONSE_FIELDS = { status: 'int', headers: 'map<string, string>', size: 'int' } as const

function baseEnv(): Environment {
  return new Environment({
    homogeneousAggregateLiterals: false,
    limits: { maxAstNodes: 2000, maxDepth: 64, maxListElements: 500, maxMapEntries: 500, maxCallArguments: 16 },
  }).registerFunction(RE2_LITERAL).registerFunction(RE2_DYNAMIC)
}

const envCache = new Map<string, Environment>()
function envFor(site: CelSite, opts: CelSiteOptions): Environment {
  const vars = SITE_VARS[site]
  const requestKind = vars.request === 'plain' && opts.withBody ? 'body' : vars.request
  const key = `${site}:${requestKind}:${opts.declare?.key ?? ''}`
  const cached = envCache.get(key)
  if (cached) return cached
  const env = baseEnv()
  if (requestKind) {
    env.registerType('Request', { fields: requestKind === 'body' ? { ...REQUEST_FIELDS, body: 'dyn' } : { ...REQUEST_FIELDS } })
    env.registerVariable('request', 'Request')
  }
  if (vars.response) {
    env.registerType('Response', { fields: vars.response === 'body' ? { ...RESPONSE_FIELDS, body: 'dyn' } : { ...RESPONSE_FIELDS } })
    env.registerVariable('response', 'Response')
  }
  if (vars.ctx) {
    env.registerType('Workspace', { fields: { id: 'string', org_id: 'string', role: 'string', environment: 'string' } })
    env.registerType('Task', { fields: { id: 'string' } })
    env.registerVariable('workspace', 'Workspace')
    env.registerVariable('task', 'Task')
  }
  if (vars.secrets) env.registerVariable('secrets', 'map<string, string>')
  if (vars.event) env.registerVariable('event', 'map<string, dyn>')
  for (const t of opts.declare?.types ?? []) env.registerType(t.name, { fields: { ...t.fields } })
  for (const [name, type] of Object.entries(opts.declare?.vars ?? {})) env.registerVariable(name, type)
  if (envCache.size >= PROGRAM_CACHE_MAX) envCache.delete(envCache.keys().next().value as string)
  envCache.set(key, env)
  return env
}

function children(node: ASTNode): ASTNode[] {
  const out: ASTNode[] = []
  const visit = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(visit)
    else if (v && typeof v === 'object' && 'op' in v && 'args' in v) out.push(v as ASTNode)
  }
  visit(node.args)
  return out
}

function walk(node: ASTNode, fn: (n: ASTNode, parent?: ASTNode) => void, parent?: ASTNode): void {
  fn(node, parent)
  for (const c of children(node)) walk(c, fn, node)
}

interface MatchesCall {
  node: ASTNode
  subject: ASTNode
  pattern: ASTNode
}

// `x.matches(p)` is the only form the engine accepts (the global `matches(x, p)` does not type-check).
function matchesCalls(ast: ASTNode): MatchesCall[] {
  const out: MatchesCall[] = []
  walk(ast, (n) => {
    if (n.op === 'rcall' && n.args[0] === 'matches' && n.args[2].length === 1) out.push({ node: n, subject: n.args[1], pattern: n.args[2][0] })
  })
  return out
}

function dottedName(node: ASTNode): string | undefined {
  if (node.op === 'id') return node.args
  if (node.op === '.') {
    const base = dottedName(node.args[0])
    return base === undefined ? undefined : `${base}.${node.args[1]}`
  }
  return undefined
}

const TYPED_ROOTS = new Set(['request', 'response', 'workspace', 'task', 'args'])

function firstLine(message: string): string {
  return message.split('\n')[0].trim()
}

function resultAccepted(kind: CelResultKind, type: string): boolean {
  if (type === 'dyn') return true
  switch (kind) {
    case 'bool':
      return type === 'bool'
    case 'string':
      return type === 'string'
    case 'map':
      return type === 'map' || type.startsWith('map<string,') || type.startsWith('map<dyn,')
    case 'number':
      return type === 'int' || type === 'uint' || type === 'double'
  }
}

const KIND_LABEL: Record<CelResultKind, string> = { bool: 'bool', string: 'string', map: 'map(string, dyn)', number: 'a number (int, uint or double)' }

// Programs are immutable, so identical expressions at the same kind of site share one program
// (policies repeat the same values, e.g. '"identity"', across capabilities). Bounded.
const programCache = new Map<string, CelCompileResult>()
const PROGRAM_CACHE_MAX = 5000

/** Parses and type-checks an expression for a site; returns a runnable program or issues. */
export function compileCel(source: string, site: CelSite, expected: CelResultKind, opts: CelSiteOptions = {}): CelCompileResult {
  const key = `${site}\u0000${expected}\u0000${opts.withBody ? 1 : 0}\u0000${opts.declare?.key ?? ''}\u0000${source}`
  const hit = programCache.get(key)
  if (hit) return hit
  const res = compileCelUncached(source, site, expected, opts)
  if (programCache.size >= PROGRAM_CACHE_MAX) programCache.delete(programCache.keys().next().value as string)
  programCache.set(key, res)
  return res
}

function compileCelUncached(source: string, site: CelSite, expected: CelResultKind, opts: CelSiteOptions): CelCompileResult {
  const env = envFor(site, opts)
  let parsed
  try {
    parsed = env.parse(source)
  } catch (e) {
    return { ok: false, issues: [{ code: 'cel_syntax', message: `CEL syntax error: ${firstLine((e as Error).message)}` }] }
  }
  const { issues, secretKeys } = secretReferences(parsed.ast, site)
  const calls = matchesCalls(parsed.ast)
  for (const c of calls) {
    if (c.pattern.op === 'value' && typeof c.pattern.args === 'string') {
      const err = re2Error(c.pattern.args)
      if (err) issues.push({ code: 'cel_invalid_regex', message: `invalid RE2 pattern ${JSON.stringify(c.pattern.args)}: ${err}` })
    }
  }
  if (issues.length > 0) return { ok: false, issues: dedupe(issues) }

  const checked = typeCheck(parsed, opts.declare !== undefined)
  if ('issue' in checked) return { ok: false, issues: [checked.issue] }
  const type = checked.type
  if (!resultAccepted(expected, type)) {
    return { ok: false, issues: [{ code: 'cel_result_type', message: `expression must produce ${KIND_LABEL[expected]}, but produces ${type}` }] }
  }
  const runnable = calls.length > 0 ? withRe2Matches(env, source, calls) : parsed
  if (!runnable) return { ok: false, issues: [{ code: 'cel_syntax', message: 'unsupported use of matches(): write it as <string>.matches(<pattern>)' }] }
  const { cost } = estimateCelCost(runnable.ast)
  if (cost > CEL_EXPR_COST_LIMIT) {
    const shown = cost >= 1e15 ? 'unbounded' : Math.ceil(cost).toLocaleString('en-US')
    return {
      ok: false,
      issues: [
        {
          code: 'cel_cost_exceeded',
          message: `expression may cost ${shown} units per evaluation, over the limit of ${CEL_EXPR_COST_LIMIT.toLocaleString('en-US')} (inputs taken at ${CEL_INPUT_BOUND} elements or characters; nested comprehensions multiply)`,
        },
      ],
    }
  }
  instrumentCel(runnable.ast)
  let usesVars = false
  walk(runnable.ast, (n) => {
    if (n.op === 'id') usesVars = true
  })
  const evaluate = (vars: Record<string, unknown>): unknown => {
    const result = runnable(vars)
    assertCelBudget()
    return result
  }
  const program: CelProgram = Object.freeze({
    source,
    type,
    secretKeys: Object.freeze([...secretKeys]),
    cost,
    usesVars,
    // Inside the caller's scope (the usual case) without a closure per evaluation.
    run: (vars: Record<string, unknown>) => (celBudgetOpen() ? evaluate(vars) : withCelBudget(CEL_CALL_BUDGET, () => evaluate(vars))),
  })
  return { ok: true, program }
}

type Parsed = ReturnType<Environment['parse']>

/** `secrets` only where the site allows it, and only indexed by a string literal (the keys are resolved before evaluation). */
function secretReferences(ast: ASTNode, site: CelSite): { issues: CelIssue[]; secretKeys: Set<string> } {
  const issues: CelIssue[] = []
  const secretKeys = new Set<string>()
  const allowSecrets = SITE_VARS[site].secrets === true
  walk(ast, (n, parent) => {
    if (n.op !== 'id' || n.args !== 'secrets') return
    if (!allowSecrets) {
      issues.push({ code: 'cel_secrets_not_allowed', message: `secrets are not available in a ${SITE_LABEL[site]} expression` })
      return
    }
    if (parent && parent.op === '[]' && parent.args[0] === n && parent.args[1].op === 'value' && typeof parent.args[1].args === 'string') {
      secretKeys.add(parent.args[1].args)
    } else if (parent && parent.op === '.' && parent.args[0] === n) {
      secretKeys.add(parent.args[1])
    } else {
      issues.push({ code: 'cel_secrets_dynamic_key', message: 'secrets may only be indexed with a string literal, e.g. secrets["api_key"]' })
    }
  })
  return { issues, secretKeys }
}

/** The library's type check, its errors in our codes. */
function typeCheck(parsed: Parsed, nameFields = false): { type: string } | { issue: CelIssue } {
  let checked: ReturnType<Parsed['check']>
  try {
    checked = parsed.check()
  } catch (e) {
    return { issue: { code: 'cel_type', message: `CEL type error: ${firstLine((e as Error).message ?? String(e))}` } }
  }
  if (checked.valid) return { type: checked.type ?? 'dyn' }
  const err = checked.error as (Error & { code?: string; node?: ASTNode }) | undefined
  const code = err?.code
  if (code === 'unknown_variable') {
    const name = err?.node && err.node.op === 'id' ? err.node.args : firstLine(err?.message ?? '').replace(/^Unknown variable:\s*/, '')
    return { issue: { code: 'cel_undeclared', message: `undeclared reference: ${name}` } }
  }
  if (code === 'no_such_key' && err?.node && err.node.op === '.') {
    const name = dottedName(err.node)
    if (name && TYPED_ROOTS.has(name.split('.')[0])) return { issue: { code: 'cel_undeclared', message: `undeclared reference: ${name}` } }
  }
  // Declared object types (an MCP tool's arguments): say which fields the failing operation reads.
  const fields = nameFields && err?.node ? [err.node, ...children(err.node)].map(dottedName).filter((n): n is string => n !== undefined && n.includes('.')) : []
  const at = fields.length ? ` (${[...new Set(fields)].join(', ')})` : ''
  return { issue: { code: 'cel_type', message: `CEL type error: ${firstLine(err?.message ?? 'invalid expression')}${at}` } }
}

/** The program with every matches() call rewritten to the RE2-backed functions; undefined when a call cannot be rewritten. */
function withRe2Matches(env: Environment, source: string, calls: MatchesCall[]): Parsed | undefined {
  const rewritten = rewriteMatches(source, calls)
  if (rewritten === undefined) return undefined
  try {
    const runnable = env.parse(rewritten)
    const left = matchesCalls(runnable.ast).length
    let renamed = 0
    walk(runnable.ast, (n) => {
      if (n.op === 'rcall' && (n.args[0] === RE2_LITERAL.name || n.args[0] === RE2_DYNAMIC.name)) renamed++
    })
    return left === 0 && renamed >= calls.length && runnable.check().valid ? runnable : undefined
  } catch {
    return undefined
  }
}

function dedupe(issues: CelIssue[]): CelIssue[] {
  const seen = new Set<string>()
  return issues.filter((i) => (seen.has(i.message) ? false : (seen.add(i.message), true)))
}

/** Turns a CEL number (bigint, double) into a non-negative safe integer, or undefined when it is not a usable amount. */
export function celToAmount(v: unknown): number | undefined {
  if (typeof v === 'bigint') {
    if (v < 0n) return undefined
    return v > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(v)
  }
  if (typeof v === 'number' && Number.isFinite(v) && v >= 0) return Math.min(Math.floor(v), Number.MAX_SAFE_INTEGER)
  if (v && typeof v === 'object' && 'valueOf' in v) {
    const inner = (v as { valueOf(): unknown }).valueOf()
    if (inner !== v) return celToAmount(inner)
  }
  return undefined
}

/** True for a CEL map result (plain object or Map). */
export function isCelMap(v: unknown): v is Record<string, unknown> | Map<unknown, unknown> {
  return v instanceof Map || (typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array))
}

/** Converts a CEL value into plain JSON (bigint → number, Map → object). */
export function celToJson(v: unknown): unknown {
  if (typeof v === 'bigint') return Number(v)
  if (v instanceof Map) return Object.fromEntries([...v.entries()].map(([k, x]) => [String(k), celToJson(x)]))
  if (Array.isArray(v)) return v.map(celToJson)
  if (v instanceof Uint8Array) return Buffer.from(v).toString('base64')
  if (v && typeof v === 'object') {
    const inner = (v as { valueOf(): unknown }).valueOf()
    if (inner !== v) return celToJson(inner)
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, celToJson(x)]))
  }
  return v
}
