// The CompiledPolicy: pure evaluators over the compiled model, called by the proxy on every
// request. Nothing here parses YAML or compiles CEL/regex/schemas; evaluation errors come back as
// deny reasons or transforms_failed values, never as exceptions.

import type { TransformFailure } from '../contract/index.js'
import { CEL_CALL_BUDGET } from './cel-cost.js'
import { withCelBudgetCall } from './cel-meter.js'
import type { CelProgram } from './cel.js'
import { DomainIndex, normalizeHost } from './glob.js'
import { summarizeErrors } from './json-schema.js'
import { bodyText, celVars, isJsonType, mediaType } from './request-vars.js'
import { placeValue, secretsFor } from './transform-apply.js'
import type { CCapability, CRule, CTransform } from './model.js'
import type {
  McpServerPolicy, AdmissionResult, AllowRuleEval, BodyInput, BodyResult, CompiledCounter, CompiledPolicy, Deny, PolicyContext,
  PolicyRequest, RuleMatch, TransformInput, TransformOutput,
} from './types.js'

type Outcome = AllowRuleEval["failed"]

const EVAL_DOMAIN_MAX = 20
/** Shortest value built from secrets that is scrubbed as a whole (the secrets themselves always are). */
const DERIVED_MIN = 8
/** The variables of a literal (it reads none): one frozen object, not one per evaluation. */
const NO_VARS: Record<string, unknown> = Object.freeze({})

function errorLine(e: unknown): string {
  return (e instanceof Error ? e.message : String(e)).split('\n')[0].slice(0, 200)
}

function ruleMatch(cap: CCapability, rule: CRule): RuleMatch {
  return Object.freeze({
    capability: cap.name, capabilityIndex: cap.index, ...(rule.name ? { rule: rule.name } : {}), ruleIndex: rule.index, ruleKey: rule.key,
    ...(rule.allowPrivate.length ? { allowPrivate: rule.allowPrivate } : {}),
  })
}

// Criteria in evaluation order: domain, scheme, method, path (then match). Domain comes first
// because it is what rules of different capabilities differ on, so allowrule_eval stays readable.
function staticOutcome(rule: CRule, scheme: string, host: string, method: string, path: string): Outcome | undefined {
  let ok = false
  for (const d of rule.domains) if (d(host)) { ok = true; break }
  if (!ok) return 'domain'
  if (scheme !== 'https' && !rule.allowInsecure) return 'scheme'
  if (!rule.methods.has(method)) return 'method'
  if (rule.paths) {
    ok = false
    for (const p of rule.paths) if (p(path)) { ok = true; break }
    if (!ok) return 'path'
  }
  return undefined
}

type CelCheck = { ok: true; value: boolean } | { ok: false; reason: 'policy_error' | 'policy_type_error' | 'policy_empty'; message: string }

function runBool(program: CelProgram, vars: Record<string, unknown>): CelCheck {
  let v: unknown
  try {
    v = program.run(vars)
  } catch (e) {
    return { ok: false, reason: 'policy_error', message: ((e as Error).message ?? String(e)).split('\n')[0] }
  }
  if (v === null || v === undefined) return { ok: false, reason: 'policy_empty', message: 'match expression returned no value' }
  if (typeof v !== 'boolean') return { ok: false, reason: 'policy_type_error', message: `match expression returned ${typeof v}, not bool` }
  return { ok: true, value: v }
}

export class Policy implements CompiledPolicy {
  readonly capabilities: CompiledPolicy['capabilities']
  readonly #caps: readonly CCapability[]
  readonly #byName: ReadonlyMap<string, CCapability>
  /** Every allow rule in document order; DomainIndex items are positions in this list. */
  readonly #flat: readonly { cap: CCapability; rule: CRule; match: RuleMatch }[]
  readonly #index = new DomainIndex()

  constructor(
    readonly hash: string,
    caps: CCapability[],
  ) {
    this.#caps = caps
    this.#byName = new Map(caps.map((c) => [c.name, c]))
    // RuleMatch objects are built once and shared: admission allocates nothing on an allow.
    this.#flat = caps.flatMap((cap) => cap.rules.map((rule) => ({ cap, rule, match: ruleMatch(cap, rule) })))
    this.#flat.forEach(({ rule }, i) => rule.domainPatterns.forEach((d) => this.#index.add(d, i)))
    this.capabilities = Object.freeze(
      caps.map((c) =>
        Object.freeze({
          name: c.name,
          rules: Object.freeze(c.rules.map((r) => Object.freeze({ ...(r.name ? { name: r.name } : {}), key: r.key, domains: Object.freeze([...r.domainPatterns]), methods: Object.freeze([...r.methods]), paths: Object.freeze([...r.pathPatterns]) }))),
          counters: Object.freeze([...c.counters]),
          ...materialNames(c),
        }),
      ),
    )
    Object.freeze(this)
  }

  // The public evaluators never throw: anything unexpected (a malformed request object, a bug)
  // becomes a deny with policy_error, which the proxy records like any other decision. Each one is
  // one CEL budget scope: all the expressions it evaluates share CEL_CALL_BUDGET (cel-cost.ts).
  admit(request: PolicyRequest, context: PolicyContext): AdmissionResult {
    try {
      return withCelBudgetCall(CEL_CALL_BUDGET, this, this.#admit, request, context)
    } catch (e) {
      return { decision: 'deny', reason: 'policy_error', detail: { message: errorLine(e) } }
    }
  }

  passthrough(host: string): RuleMatch | undefined {
    const h = normalizeHost(host, 'https')
    for (const i of this.#index.lookup(h)) {
      const { rule, match } = this.#flat[i]
      if (rule.passthrough && rule.domains.some((d) => d(h))) return match
    }
    return undefined
  }

  #admit(request: PolicyRequest, context: PolicyContext): AdmissionResult {
    const host = normalizeHost(request.host, request.scheme)
    const method = request.method.toUpperCase()
    const { path, scheme } = request
    let vars: Record<string, unknown> | undefined
    const candidates: RuleMatch[] = []
    let failure: CelCheck | undefined
    let checked: Map<number, CelCheck> | undefined
    for (const i of this.#index.lookup(host)) {
      const { rule, match } = this.#flat[i]
      if (staticOutcome(rule, scheme, host, method, path) !== undefined) continue
      if (rule.matchRequiresBody) {
        candidates.push(match)
        continue
      }
      if (rule.match) {
        vars ??= celVars(request, context)
        const res = runBool(rule.match, vars)
        if (!res.ok || !res.value) (checked ??= new Map()).set(i, res)
        if (!res.ok) {
          failure ??= res
          continue
        }
        if (!res.value) continue
      }
      if (candidates.length > 0) return { decision: 'pending', candidates: Object.freeze([...candidates, match]) }
      return { decision: 'allow', match, needsBody: rule.needsBody }
    }
    if (candidates.length > 0) return { decision: 'pending', candidates: Object.freeze(candidates) }
    return this.#noMatch(request, context, failure, checked)
  }

  /** Slow path, only on deny: explain every rule's first failing criterion. */
  // `checked` holds the match results of the pass above: a deny explains them without evaluating
  // any expression twice (it shares that pass's CEL budget).
  #noMatch(request: PolicyRequest, context: PolicyContext, failure: CelCheck | undefined, checked: Map<number, CelCheck> | undefined): Deny {
    const host = normalizeHost(request.host, request.scheme)
    const method = request.method.toUpperCase()
    const evals: AllowRuleEval[] = []
    const vars = celVars(request, context)
    // Rules for other hosts would drown the useful entries: list the rules whose domain matched,
    // and only when there are none, the first EVAL_DOMAIN_MAX rules as domain misses.
    for (const i of this.#index.lookup(host)) {
      const { cap, rule } = this.#flat[i]
      const failed = staticOutcome(rule, request.scheme, host, method, request.path)
      if (failed === 'domain') continue
      if (failed) evals.push({ capability: cap.name, rule: rule.key, failed })
      else if (rule.match) {
        const res = checked?.get(i) ?? runBool(rule.match, vars)
        evals.push(res.ok ? { capability: cap.name, rule: rule.key, failed: 'match' } : { capability: cap.name, rule: rule.key, failed: 'match_error', message: res.message })
      }
    }
    if (evals.length === 0) for (const { cap, rule } of this.#flat.slice(0, EVAL_DOMAIN_MAX)) evals.push({ capability: cap.name, rule: rule.key, failed: 'domain' })
    if (failure && !failure.ok) return { decision: 'deny', reason: failure.reason, detail: { allowrule_eval: evals, message: failure.message } }
    return { decision: 'deny', reason: 'no_match', detail: { allowrule_eval: evals } }
  }

  /** The MCP server policy of the matched rule, when its destination is an MCP server. */
  mcp(m: RuleMatch): McpServerPolicy | undefined {
    return this.#rule(m)?.rule.mcp
  }

  #rule(m: RuleMatch): { cap: CCapability; rule: CRule } | undefined {
    const cap = this.#caps[m.capabilityIndex]
    const rule = cap?.rules[m.ruleIndex]
    return cap && rule && cap.name === m.capability ? { cap, rule } : undefined
  }

  checkBody(admission: Exclude<AdmissionResult, Deny>, input: BodyInput): BodyResult {
    try {
      return withCelBudgetCall(CEL_CALL_BUDGET, this, this.#checkBody, admission, input)
    } catch (e) {
      return { decision: 'deny', reason: 'policy_error', detail: { message: errorLine(e) }, validationsApplied: 0 }
    }
  }

  #checkBody(admission: Exclude<AdmissionResult, Deny>, input: BodyInput): BodyResult {
    // The candidates without an array for the one an allow names.
    const allowed = admission.decision === 'allow' ? admission.match : undefined
    const candidates = admission.decision === 'allow' ? undefined : admission.candidates
    const count = candidates ? candidates.length : 1
    const present = input.body !== undefined && (typeof input.body === 'string' ? input.body.length > 0 : input.body.byteLength > 0)
    let validations = 0
    // Parsed once for every candidate; the explanations only when one fails.
    let parsed = false
    let parsedValue: unknown
    let parseFailed = false
    let evals: AllowRuleEval[] | undefined
    let failure: CelCheck | undefined
    for (let c = 0; c < count; c++) {
      const m = allowed ?? candidates![c]!
      const found = this.#rule(m)
      if (!found) return { decision: 'deny', reason: 'internal_error', detail: { message: 'admission does not belong to this policy' }, validationsApplied: validations }
      const { rule } = found
      let json: unknown
      if (rule.requestFormat === 'application/json' && present) {
        if (!isJsonType(mediaType(input.request.headers))) {
          ;(evals ??= []).push({ capability: m.capability, rule: m.ruleKey, failed: 'format' })
          return { decision: 'deny', reason: 'format_mismatch', detail: { allowrule_eval: evals, capability: m.capability, rule: m.ruleKey, message: `Content-Type must be application/json` }, validationsApplied: validations }
        }
        if (!parsed) {
          parsed = true
          try {
            parsedValue = JSON.parse(bodyText(input.body!))
          } catch {
            parseFailed = true
          }
        }
        if (parseFailed) {
          ;(evals ??= []).push({ capability: m.capability, rule: m.ruleKey, failed: 'json' })
          return { decision: 'deny', reason: 'invalid_json', detail: { allowrule_eval: evals, capability: m.capability, rule: m.ruleKey }, validationsApplied: validations }
        }
        json = parsedValue
        if (rule.schema) {
          validations++
          if (!rule.schema(json)) {
            const errors = summarizeErrors(rule.schema.errors)
            ;(evals ??= []).push({ capability: m.capability, rule: m.ruleKey, failed: 'schema', message: errors.join('; ') })
            return { decision: 'deny', reason: 'schema_violation', detail: { allowrule_eval: evals, capability: m.capability, rule: m.ruleKey, errors }, validationsApplied: validations }
          }
        }
      }
      if (rule.matchRequiresBody && rule.match) {
        const res = runBool(rule.match, celVars(input.request, input.context, json ?? null))
        if (!res.ok) {
          failure ??= res
          ;(evals ??= []).push({ capability: m.capability, rule: m.ruleKey, failed: 'match_error', message: res.message })
          continue
        }
        if (!res.value) {
          ;(evals ??= []).push({ capability: m.capability, rule: m.ruleKey, failed: 'match' })
          continue
        }
      }
      return { decision: 'allow', match: m, json, validationsApplied: validations }
    }
    if (failure && !failure.ok) return { decision: 'deny', reason: failure.reason, detail: { allowrule_eval: evals ?? [], message: failure.message }, validationsApplied: validations }
    return { decision: 'deny', reason: 'no_match', detail: { allowrule_eval: evals ?? [] }, validationsApplied: validations }
  }

  applyTransforms(input: TransformInput): TransformOutput {
    return withCelBudgetCall(CEL_CALL_BUDGET, this, this.#applyTransforms, input, undefined)
  }

  #applyTransforms(input: TransformInput): TransformOutput {
    const headers: Record<string, string[]> = {}
    for (const k in input.request.headers) {
      const v = input.request.headers[k]
      headers[k.toLowerCase()] = typeof v === 'string' ? [v] : [...v]
    }
    const out: TransformOutput = {
      method: input.request.method.toUpperCase(),
      path: input.request.path,
      rawQuery: input.request.rawQuery,
      headers,
      bodyChanged: false,
      applied: 0,
      appliedKeys: [],
      failed: {},
      auth: [],
      injected: [],
    }
    if (input.json !== undefined) out.json = input.json
    const found = this.#rule(input.match)
    if (!found) return out
    const { cap, rule } = found
    // CEL variables are built on first use: many transforms (remove, auth, literals) need none.
    let base: Record<string, unknown> | undefined
    let withBody: Record<string, unknown> | undefined
    const varsFor = (body: boolean) =>
      body ? (withBody ??= celVars(input.request, input.context, input.json ?? null)) : (base ??= celVars(input.request, input.context))
    const hasBody = input.hasBody ?? input.json !== undefined

    for (const t of cap.transforms) {
      if (t.appliesTo && !(rule.name !== undefined && t.appliesTo.has(rule.name))) continue
      if (t.kind === 'auth') {
        out.auth.push({ credential: t.credential, provider: t.provider, key: t.key })
        continue
      }
      if (t.kind === 'body' && (!hasBody || out.json === undefined)) {
        out.failed[t.key] = 'body_absent'
        continue
      }
      try {
        if (this.#applyOne(t, input, out, varsFor)) {
          out.applied++
          out.appliedKeys.push(t.key)
        }
      } catch {
        out.failed[t.key] = 'apply_error'
      }
    }
    return out
  }

  /** Applies one non-auth transform to `out`; returns false when it failed (recorded in out.failed). */
  #applyOne(t: CTransform, input: TransformInput, out: TransformOutput, varsFor: (body: boolean) => Record<string, unknown>): boolean {
    const fail = (reason: TransformFailure): false => {
      out.failed[t.key] = reason
      return false
    }
    const program = 'value' in t ? t.value : undefined
    let value: unknown
    let usedSecrets: string[] | undefined
    if (program) {
      // A literal reads no variable: nothing is built for it. Secrets go into a copy of the shared variables.
      let vars: Record<string, unknown> = program.usesVars === false ? NO_VARS : varsFor(t.requiresBody)
      if (program.secretKeys.length > 0) {
        vars = { ...vars }
        const secrets = secretsFor(program.secretKeys, input)
        if (typeof secrets === 'string') return fail(secrets)
        vars.secrets = secrets
        usedSecrets = Object.values(secrets)
      }
      try {
        value = program.run(vars)
      } catch {
        return fail('eval_error')
      }
    }
    const failed = placeValue(t, value, out)
    if (failed) return fail(failed)
    // What was injected from secrets, for the proxy to scrub from the response (scrub.ts): the
    // secret values, and the value placed (which may hold them transformed, e.g. concatenated).
    // A short derived value ("1", "yes") is no secret and would mask every such byte run.
    if (usedSecrets) {
      out.injected.push(...usedSecrets)
      if (typeof value === 'string' && value.length >= DERIVED_MIN) out.injected.push(value, encodeURIComponent(value))
    }
    return true
  }

  counters(capability: string): readonly CompiledCounter[] {
    return this.#byName.get(capability)?.counters ?? []
  }
}

/** The credential and secret names a capability's transforms use (role saves warn when one is missing). */
function materialNames(cap: CCapability): { credentials: readonly string[]; secrets: readonly string[] } {
  const credentials = new Set<string>()
  const secrets = new Set<string>()
  for (const t of cap.transforms) {
    if (t.kind === 'auth') credentials.add(t.credential)
    else for (const k of t.value?.secretKeys ?? []) secrets.add(k)
  }
  return { credentials: Object.freeze([...credentials].sort()), secrets: Object.freeze([...secrets].sort()) }
}
