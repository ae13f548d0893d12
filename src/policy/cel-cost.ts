// Bounded CEL cost: one cost model, used twice.
//
// - At save, `estimateCelCost` bounds the work of one evaluation of a checked expression, in
//   units: one unit per AST node evaluated, plus one unit per 4 elements or characters that an
//   operation must touch (both sides of `+`, the smaller side of a comparison, the list of `in`,
//   every operand of a function call, the range of a comprehension). A comprehension multiplies
//   its step by its iterations. Values are bounded by their "weight" (characters of a string,
//   elements of a list or map counted recursively), so an element never outweighs its container.
//   Inputs (`request`, `response`, `event`, …) are taken at CEL_INPUT_BOUND.
// - At run time, `instrumentCel` wraps the very same nodes so every evaluation is metered in the
//   same units (cel-meter.ts), and an evaluation that goes over its budget throws
//   CelBudgetExceeded. The budget is shared by every expression a `withCelBudget` scope evaluates
//   (one proxy phase of one request), so many cheap rules cannot add up to a freeze either.
//
// The estimate is an upper bound of the meter for inputs within the bound (property-tested in
// test/policy/cel-cost.test.ts); larger inputs are caught by the meter. The engine's internal AST
// is read through cel-ast.ts.

import { COMPARISONS, NUMERIC, SIZE_SHIFT, type ComprehensionArgs, type Macro, type Node } from './cel-ast.js'

/** Size assumed for every input value (characters or elements, counted recursively). */
export const CEL_INPUT_BOUND = 1024
/** Most units one expression may cost at save (`cel_cost_exceeded`). */
export const CEL_EXPR_COST_LIMIT = 50_000
/** Most units all expressions of one policy may cost together at save (`cel_cost_exceeded`). */
export const CEL_POLICY_COST_LIMIT = 100_000
/**
 * Units one proxy phase of one request may spend at run time, over all the expressions it
 * evaluates: what an accepted policy can need in one phase (each expression runs at most once).
 * The limits leave the deadline below about four times the headroom it needs on a busy machine.
 */
export const CEL_CALL_BUDGET = CEL_POLICY_COST_LIMIT
/**
 * Wall-clock backstop of the same scope, the bound the event loop can rely on: units are
 * only calibrated (docs/policy.md "Cost limits"), the clock is not argued with.
 */
export const CEL_CALL_DEADLINE_MS = 20

const HUGE = 1e18
const units = (size: number): number => Math.ceil(size / SIZE_SHIFT)
const cap = (x: number): number => (x > HUGE || Number.isNaN(x) ? HUGE : x)

export interface CelCost {
  /** Upper bound of the units one evaluation costs (inputs within CEL_INPUT_BOUND). */
  cost: number
  /** Upper bound of the result's weight. */
  weight: number
}

interface Frame {
  scope: ReadonlyMap<string, number>
  /** Largest weight pushed onto the innermost comprehension's accumulator. */
  acc: { push: number; pushes: boolean }
}

// Scalars weigh nothing: they cannot be iterated and the meter sizes them at 0.
function literalWeight(v: unknown): number {
  if (typeof v === 'string') return v.length
  if (v instanceof Uint8Array) return v.length
  return 0
}

// Result weight of a function from its operands' weights; anything not listed returns at most
// what it was given, or a short scalar/string (numbers, timestamps, durations, `string(1.5)`).
function callWeight(name: string, ws: number[]): number {
  const total = ws.reduce((a, b) => a + b, 0)
  switch (name) {
    case 'join':
      return cap(ws[0] * (1 + (ws[1] ?? 0)))
    case 'split':
      return cap(2 * ws[0] + 1)
    case 'bytes':
      return cap(3 * total)
    case 'hex':
    case 'base64':
      return cap(2 * total + 4)
    default:
      return Math.max(32, total)
  }
}

function est(n: Node, f: Frame): CelCost {
  const m = n.meta
  if (m.alternate) return est(m.alternate, f)
  if (m.macro) return estMacro(m.macro, f)
  const a = n.args
  switch (n.op) {
    case 'value':
      return { cost: 1, weight: literalWeight(a) }
    case 'id':
      return { cost: 1, weight: f.scope.get(a) ?? (a === 'cel' ? 0 : CEL_INPUT_BOUND) }
    case '.':
    case '.?': {
      const o = est(a[0], f)
      return { cost: cap(1 + o.cost), weight: o.weight }
    }
    case '[]':
    case '[?]': {
      const o = est(a[0], f)
      const k = est(a[1], f)
      return { cost: cap(1 + o.cost + k.cost), weight: o.weight }
    }
    case 'list':
      return estList(a as Node[], f)
    case 'map':
      return estMap(a as [Node, Node][], f)
    case '?:': {
      const c = est(a[0], f)
      const l = est(a[1], f)
      const r = est(a[2], f)
      return { cost: cap(1 + c.cost + Math.max(l.cost, r.cost)), weight: Math.max(l.weight, r.weight) }
    }
    case '&&':
    case '||': {
      const l = est(a[0], f)
      const r = est(a[1], f)
      return { cost: cap(1 + l.cost + r.cost), weight: 0 }
    }
    case '!_':
    case '-_':
      return { cost: cap(1 + est(a, f).cost), weight: 0 }
    case 'accuValue':
    case 'accuInc':
      return { cost: 1, weight: 0 }
    case 'accuPush': {
      const r = est(a, f)
      f.acc.pushes = true
      f.acc.push = Math.max(f.acc.push, r.weight)
      return { cost: cap(1 + r.cost), weight: 0 }
    }
    case 'comprehension':
      return estComprehension(a as ComprehensionArgs, f)
    case 'call':
    case 'rcall':
      return estCall(n, f)
  }
  if (n.op === '+' || n.op === 'in' || COMPARISONS.has(n.op) || NUMERIC.has(n.op)) return estBinary(n, f)
  // An operation this model does not know cannot be shown to be bounded.
  return { cost: HUGE, weight: HUGE }
}

function estList(items: Node[], f: Frame): CelCost {
  let cost = 1
  let weight = items.length
  for (const e of items) {
    const r = est(e, f)
    cost += r.cost
    weight += r.weight
  }
  return { cost: cap(cost), weight: cap(weight) }
}

function estMap(entries: [Node, Node][], f: Frame): CelCost {
  let cost = 1
  let weight = entries.length
  for (const [k, v] of entries) {
    const rk = est(k, f)
    const rv = est(v, f)
    cost += rk.cost + rv.cost
    weight += rk.weight + rv.weight
  }
  return { cost: cap(cost), weight: cap(weight) }
}

function estCall(n: Node, f: Frame): CelCost {
  const a = n.args
  const ops = n.op === 'call' ? (a[1] as Node[]) : [a[1] as Node, ...(a[2] as Node[])]
  const rs = ops.map((o) => est(o, f))
  const ws = rs.map((r) => r.weight)
  let cost = 1 + rs.reduce((s, r) => s + r.cost, 0) + units(ws.reduce((s, w) => s + w, 0))
  // join also pays for the string it builds: receiver elements × separator length.
  if (n.op === 'rcall' && a[0] === 'join' && ws.length === 2) cost += units(ws[0] * ws[1])
  return { cost: cap(cost), weight: callWeight(a[0], ws) }
}

/** +, in, comparisons and arithmetic: both sides, plus what + builds and what in/== scan. */
function estBinary(n: Node, f: Frame): CelCost {
  const a = n.args
  const l = est(a[0], f)
  const r = est(a[1], f)
  const base = 1 + l.cost + r.cost
  if (n.op === '+') return { cost: cap(base + units(l.weight + r.weight)), weight: cap(l.weight + r.weight) }
  if (n.op === 'in') return { cost: cap(base + units(r.weight)), weight: 0 }
  if (COMPARISONS.has(n.op)) return { cost: cap(base + units(Math.min(l.weight, r.weight))), weight: 0 }
  return { cost: cap(base), weight: 0 }
}

function estComprehension(a: ComprehensionArgs, f: Frame): CelCost {
  const range = est(a.iterable, f)
  const init = est(a.init, f)
  const iterations = range.weight
  const inner: Frame = { scope: new Map([...f.scope, [a.iterVarName, range.weight]]), acc: { push: 0, pushes: false } }
  const step = est(a.step, inner)
  const cost = 1 + units(range.weight) + range.cost + init.cost + iterations * step.cost
  const weight = a.kind === 'quantifier' || !inner.acc.pushes ? 0 : iterations * (1 + inner.acc.push)
  return { cost: cap(cost), weight: cap(weight) }
}

function estMacro(mac: Macro, f: Frame): CelCost {
  if (mac.val && mac.exp && typeof mac.var === 'string') {
    // cel.bind(var, val, exp)
    const v = est(mac.val, f)
    const e = est(mac.exp, { scope: new Map([...f.scope, [mac.var, v.weight]]), acc: f.acc })
    return { cost: cap(1 + v.cost + e.cost), weight: e.weight }
  }
  if (mac.args) {
    // has(x.f): reads a field chain once
    return { cost: cap(1 + mac.args.reduce((s, x) => s + est(x, f).cost, 0)), weight: 0 }
  }
  return { cost: HUGE, weight: HUGE }
}

/** Worst-case units of one evaluation of a checked expression (its engine AST). */
export function estimateCelCost(ast: unknown): CelCost {
  return est(ast as Node, { scope: new Map(), acc: { push: 0, pushes: false } })
}
