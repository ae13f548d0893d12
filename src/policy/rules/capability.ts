// Capability: name, type, allow (≥ 1), transforms, budgets; plus the cross-field rules that need
// the whole capability (applies_to targets, request_format for body transforms, the
// Accept-Encoding pin for body-reading counters, name uniqueness).

import { isMap, isSeq, type Node } from 'yaml'
import type { CCapability, CRule, CTransform } from '../model.js'
import type { CompiledCounter } from '../types.js'
import { MapReader, pointer, seqItems, type Reader } from '../yaml-reader.js'
import { checkAllowRule, type AllowRuleResult } from './allow-rule.js'
import { checkCounter, type CounterResult } from './counter.js'
import { checkName, enumOf } from './shared.js'
import { checkTransform, type TransformResult } from './transform.js'

const KEYS = ['name', 'type', 'allow', 'transforms', 'budgets'] as const

export interface CapabilityResult {
  capability?: CCapability
  name?: { value: string; node: Node; path: string }
}

function uniqueNames(r: Reader, names: ({ value: string; node: Node; path: string } | undefined)[], what: string): void {
  const seen = new Set<string>()
  for (const n of names) {
    if (!n) continue
    if (seen.has(n.value)) r.error('duplicate_name', `${what} "${n.value}" is already used in this capability`, n.path, n.node)
    seen.add(n.value)
  }
}

export function checkCapability(r: Reader, node: Node | null, path: string, index: number): CapabilityResult {
  if (!node || !isMap(node)) {
    r.error('invalid_type', 'a capability must be a mapping with name, type and allow', path, node)
    return {}
  }
  const before = r.diagnostics.filter((d) => d.severity === 'error').length
  const m = new MapReader(r, node, path, KEYS, 'capability')
  m.require('name', 'a capability')
  m.require('type', 'a capability')
  m.require('allow', 'a capability')
  const name = m.str('name')
  const nameOk = name ? checkName(r, name.value, name.field.path, name.field.node, 'capability name') : false
  enumOf(m, 'type', ['http'] as const)
  const capName = name?.value ?? `capability[${index}]`

  const rules = checkAllowRules(r, m)
  uniqueNames(r, rules.map((x) => x.name), 'allow rule name')

  // transforms
  const transforms: TransformResult[] = []
  const tl = m.list('transforms')
  tl?.items.forEach((it, i) => {
    const res = checkTransform(r, it.node, it.path, i)
    if (res) transforms.push(res)
  })
  uniqueNames(r, transforms.map((t) => (t.name && t.name.value !== '' ? { value: t.name.value, node: t.name.field.node ?? t.name.field.keyNode, path: t.name.field.path } : undefined)), 'transform name')

  checkTransformTargets(r, rules, transforms, capName)
  // Transforms (credentials included) act on requests a passthrough rule never lets the proxy read.
  const through = rules.find((x) => x.passthrough)
  if (through && transforms.length > 0) r.error('passthrough_conflict', 'a capability with a passthrough rule cannot have transforms or credentials: the proxy does not decrypt its TLS', through.passthrough!.path, through.passthrough!.node)

  const counters = checkBudgets(r, m, capName)
  uniqueNames(r, counters.map((c) => c.name), 'counter name')

  checkAcceptEncodingPin(r, rules, transforms, counters)

  const after = r.diagnostics.filter((d) => d.severity === 'error').length
  const out: CapabilityResult = name && nameOk ? { name: { value: name.value, node: name.field.node ?? name.field.keyNode, path: name.field.path } } : {}
  if (after > before || !name) return out

  const compiledTransforms = transforms.map((t) => t.transform!) as CTransform[]
  const compiledRules = rules.map((x) => x.rule!) as CRule[]
  for (const rule of compiledRules) {
    rule.needsBody ||= compiledTransforms.some((t) => t.requiresBody && (t.appliesTo === null || (rule.name !== undefined && t.appliesTo.has(rule.name))))
  }
  out.capability = {
    index,
    name: name.value,
    rules: compiledRules,
    transforms: compiledTransforms,
    counters: counters.map((c) => c.counter!) as CompiledCounter[],
  }
  return out
}

function checkAllowRules(r: Reader, m: MapReader): AllowRuleResult[] {
  const rules: AllowRuleResult[] = []
  const allow = m.list('allow')
  if (allow) {
    if (allow.items.length === 0) r.error('empty_list', 'a capability needs at least one allow rule', allow.field.path, allow.field.node)
    allow.items.forEach((it, i) => {
      const res = checkAllowRule(r, it.node, it.path, i)
      if (res) rules.push(res)
    })
  }
  return rules
}

/** applies_to names a rule of this capability; a body transform's rules declare JSON; a body-reading transform's rules have a schema. */
function checkTransformTargets(r: Reader, rules: AllowRuleResult[], transforms: TransformResult[], capName: string): void {
  const ruleNames = new Map(rules.filter((x) => x.name).map((x) => [x.name!.value, x]))
  for (const t of transforms) {
    for (const a of t.appliesTo) {
      if (!ruleNames.has(a.value)) r.error('unknown_rule_reference', `applies_to names "${a.value}", which is not the name of an allow rule in capability "${capName}"`, a.path, a.node)
    }
    const targets = t.appliesTo.length > 0 ? t.appliesTo.map((a) => ruleNames.get(a.value)).filter((x): x is AllowRuleResult => x !== undefined) : rules
    if (t.kind === 'body') {
      for (const rule of targets) {
        if (!rule.requestFormatJson) r.error('request_format_required', `allow rule ${rule.name ? `"${rule.name.value}"` : rule.path} is targeted by a body transform and must declare request_format: application/json`, pointer(rule.path, 'request_format'), rule.node)
      }
    } else if (t.requiresBody && t.kind !== 'auth') {
      for (const rule of targets) {
        if (!rule.hasSchema) r.error('body_requires_schema', `transform reads request.body (requires_body: true) but allow rule ${rule.name ? `"${rule.name.value}"` : rule.path} has no request_schema`, pointer(t.path, 'requires_body'), t.node)
      }
    }
  }
}

function checkBudgets(r: Reader, m: MapReader, capName: string): CounterResult[] {
  const counters: CounterResult[] = []
  const budgets = m.map('budgets')
  if (budgets) {
    const bm = new MapReader(r, budgets.node, budgets.field.path, ['counters'], 'budgets')
    const cf = bm.field('counters')
    if (cf) {
      if (!cf.node || !isSeq(cf.node)) r.error('invalid_type', '"counters" must be a list', cf.path, cf.node ?? cf.keyNode)
      else
        seqItems(r, cf.node, cf.path).forEach((it) => {
          const res = checkCounter(r, it.node, it.path, capName)
          if (res) counters.push(res)
        })
    }
  }
  return counters
}

/** The counter meters responses of every rule of the capability, so the pin must reach them all. */
function checkAcceptEncodingPin(r: Reader, rules: AllowRuleResult[], transforms: TransformResult[], counters: CounterResult[]): void {
  const bodyCounter = counters.find((c) => c.readsBody)
  const pins = transforms.filter((t) => t.pinsIdentity)
  const covered = (rule: AllowRuleResult) => pins.some((t) => t.appliesTo.length === 0 || (rule.name !== undefined && t.appliesTo.some((a) => a.value === rule.name!.value)))
  const uncovered = rules.filter((rule) => !covered(rule))
  if (bodyCounter && (pins.length === 0 || uncovered.length > 0)) {
    const counter = bodyCounter.name ? `counter "${bodyCounter.name.value}"` : 'a counter'
    const message =
      pins.length === 0
        ? `${counter} reads the response body, so the capability needs a header transform {name: Accept-Encoding, action: set, value: '"identity"'}`
        : `${counter} reads the response body, but the Accept-Encoding: identity transform does not apply to allow rule ${uncovered[0].name ? `"${uncovered[0].name.value}"` : uncovered[0].path}`
    r.error('accept_encoding_required', message, bodyCounter.path, bodyCounter.node)
  }
}

/** The whole document: a list of capabilities with unique names. */
export function checkDocument(r: Reader, root: Node | null): CCapability[] {
  if (!root) {
    r.error('not_a_list', 'the document is empty; a caps.yaml is a YAML list of capabilities', '', root)
    return []
  }
  if (!isSeq(root)) {
    r.error('not_a_list', 'a caps.yaml document must be a YAML list of capabilities', '', root)
    return []
  }
  if (root.items.length === 0) r.warn('no_capabilities', 'the document has no capabilities: every outbound request will be denied', '', root)
  const results = seqItems(r, root, '').map((it, i) => checkCapability(r, it.node, it.path, i))
  uniqueNames(r, results.map((x) => x.name), 'capability name')
  // uniqueNames says "in this capability"; capability names are document-wide.
  for (const d of r.diagnostics) if (d.code === 'duplicate_name' && d.message.startsWith('capability name')) d.message = d.message.replace('in this capability', 'in this document')
  return results.map((x) => x.capability).filter((c): c is CCapability => c !== undefined)
}
