// Bounded CEL cost (issue 15, class 5): one cost model, used twice.
//
// - At save, `estimateCelCost` bounds the work of one evaluation of a checked expression, in
//   units: one unit per AST node evaluated, plus one unit per 16 elements or characters that an
//   operation must touch (both sides of `+`, the smaller side of a comparison, the list of `in`,
//   every operand of a function call, the range of a comprehension). A comprehension multiplies
//   its step by its iterations. Values are bounded by their "weight" (characters of a string,
//   elements of a list or map counted recursively), so an element never outweighs its container.
//   Inputs (`request`, `response`, `event`, …) are taken at CEL_INPUT_BOUND.
// - At run time, `instrumentCel` wraps the very same nodes so every evaluation is metered in the
//   same units, and an evaluation that goes over its budget throws CelBudgetExceeded. The budget
//   is shared by every expression a `withCelBudget` scope evaluates (one proxy phase of one
//   request), so many cheap rules cannot add up to a freeze either.
//
// The estimate is an upper bound of the meter for inputs within the bound (property-tested in
// test/policy/cel-cost.test.ts); larger inputs are caught by the meter. The engine's internal AST
// (`meta.alternate` for expanded macros, `meta.macro` for has/bind) is read here and only here.

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
 * calibrated (40–120 ns each on the machines we measured), the clock is not argued with.
 */
export const CEL_CALL_DEADLINE_MS = 20

const SIZE_SHIFT = 16
const OBJECT_COUNT_CAP = 1 << 16
const HUGE = 1e18

type Fn = (this: unknown, ev: unknown, ast: unknown, ctx: unknown) => unknown
interface Macro {
  evaluate: Fn
  args?: Node[]
  val?: Node
  exp?: Node
  var?: string
}
interface ComprehensionArgs {
  iterable: Node
  init: Node
  step: Node
  iterVarName: string
  kind?: string
  condition?: (accu: unknown) => boolean
}
/** The engine's node, as far as we read it (public in the package, not in its types). */
interface Node {
  op: string
  args: any // eslint-disable-line @typescript-eslint/no-explicit-any
  meta: { evaluate?: Fn; alternate?: Node; macro?: Macro }
  setMeta(key: string, value: unknown): Node
}

export class CelBudgetExceeded extends Error {
  constructor(
    readonly budget: number,
    readonly timedOut = false,
    deadlineMs = CEL_CALL_DEADLINE_MS,
  ) {
    super(
      timedOut
        ? `CEL evaluation exceeded its time budget of ${deadlineMs} ms (docs/policy.md "Cost limits")`
        : `CEL evaluation exceeded its cost budget of ${budget} units (docs/policy.md "Cost limits")`,
    )
    this.name = 'CelBudgetExceeded'
  }
}

// ---------------------------------------------------------------------------------------------
// Which operands an operation pays for: the one rule both the estimate and the meter follow.

const COMPARISONS = new Set(['==', '!=', '<', '<=', '>', '>='])
const NUMERIC = new Set(['-', '*', '/', '%'])

function isNode(v: unknown): v is Node {
  return typeof v === 'object' && v !== null && 'op' in v && 'meta' in v
}

// An expanded macro is evaluated as its alternate (the comprehension), so that node's result is the one to size.
const evaluated = (n: Node): Node => n.meta.alternate ?? n

function operands(n: Node): { kind: 'min' | 'sum'; nodes: Node[] } | undefined {
  const found = operandNodes(n)
  return found && { kind: found.kind, nodes: found.nodes.map(evaluated) }
}

function operandNodes(n: Node): { kind: 'min' | 'sum'; nodes: Node[] } | undefined {
  if (n.meta.alternate || n.meta.macro) return undefined
  if (COMPARISONS.has(n.op)) return { kind: 'min', nodes: [n.args[0], n.args[1]] }
  if (n.op === '+') return { kind: 'sum', nodes: [n.args[0], n.args[1]] }
  if (n.op === 'in') return { kind: 'sum', nodes: [n.args[1]] }
  if (n.op === 'call') return { kind: 'sum', nodes: [...n.args[1]] }
  if (n.op === 'rcall') return { kind: 'sum', nodes: [n.args[1], ...n.args[2]] }
  if (n.op === 'comprehension') return { kind: 'sum', nodes: [n.args.iterable] }
  return undefined
}

const units = (size: number): number => Math.ceil(size / SIZE_SHIFT)
const cap = (x: number): number => (x > HUGE || Number.isNaN(x) ? HUGE : x)

// ---------------------------------------------------------------------------------------------
// Static estimate.

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
    case 'list': {
      let cost = 1
      let weight = a.length
      for (const e of a as Node[]) {
        const r = est(e, f)
        cost += r.cost
        weight += r.weight
      }
      return { cost: cap(cost), weight: cap(weight) }
    }
    case 'map': {
      let cost = 1
      let weight = a.length
      for (const [k, v] of a as [Node, Node][]) {
        const rk = est(k, f)
        const rv = est(v, f)
        cost += rk.cost + rv.cost
        weight += rk.weight + rv.weight
      }
      return { cost: cap(cost), weight: cap(weight) }
    }
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
    case 'rcall': {
      const ops = n.op === 'call' ? (a[1] as Node[]) : [a[1] as Node, ...(a[2] as Node[])]
      const rs = ops.map((o) => est(o, f))
      const ws = rs.map((r) => r.weight)
      const cost = 1 + rs.reduce((s, r) => s + r.cost, 0) + units(ws.reduce((s, w) => s + w, 0))
      return { cost: cap(cost), weight: callWeight(a[0], ws) }
    }
  }
  if (n.op === '+' || n.op === 'in' || COMPARISONS.has(n.op) || NUMERIC.has(n.op)) {
    const l = est(a[0], f)
    const r = est(a[1], f)
    const base = 1 + l.cost + r.cost
    if (n.op === '+') return { cost: cap(base + units(l.weight + r.weight)), weight: cap(l.weight + r.weight) }
    if (n.op === 'in') return { cost: cap(base + units(r.weight)), weight: 0 }
    if (COMPARISONS.has(n.op)) return { cost: cap(base + units(Math.min(l.weight, r.weight))), weight: 0 }
    return { cost: cap(base), weight: 0 }
  }
  // An operation this model does not know cannot be shown to be bounded.
  return { cost: HUGE, weight: HUGE }
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

// ---------------------------------------------------------------------------------------------
// Run-time meter.

const CLOCK_EVERY = 2048
const meter = { depth: 0, left: 0, budget: 0, spent: 0, deadline: 0, deadlineMs: 0, untilClock: 0, timedOut: false }

function exceeded(): CelBudgetExceeded {
  meter.left = -1
  return new CelBudgetExceeded(meter.budget, meter.timedOut, meter.deadlineMs)
}

/**
 * Runs `fn` with a budget of `budget` units for every CEL evaluation inside it. Nested scopes
 * join the outer one. Evaluation is synchronous, so one module-level meter is enough.
 */
export function withCelBudget<T>(budget: number, fn: () => T, deadlineMs = CEL_CALL_DEADLINE_MS): T {
  if (meter.depth > 0) return fn()
  meter.depth = 1
  meter.left = budget
  meter.budget = budget
  meter.deadline = performance.now() + deadlineMs
  meter.deadlineMs = deadlineMs
  meter.untilClock = CLOCK_EVERY
  meter.timedOut = false
  try {
    return fn()
  } finally {
    meter.spent = budget - Math.max(meter.left, 0)
    meter.depth = 0
  }
}

/** Units spent by the last finished budget scope (tests compare it with the estimate). */
export function lastCelSpend(): number {
  return meter.spent
}

/** Throws when the current scope's budget was exceeded (an error the engine swallowed, e.g. in `||`). */
export function assertCelBudget(): void {
  if (meter.left < 0) throw new CelBudgetExceeded(meter.budget, meter.timedOut, meter.deadlineMs)
}

function sizeOf(v: unknown): number {
  if (typeof v === 'string') return v.length
  if (typeof v !== 'object' || v === null) return 0
  if (Array.isArray(v) || v instanceof Uint8Array) return v.length
  if (v instanceof Map || v instanceof Set) return v.size
  const proto = Object.getPrototypeOf(v)
  if (proto !== Object.prototype && proto !== null) return 0
  let count = 0
  for (const _ in v) if (++count >= OBJECT_COUNT_CAP) break
  return count
}

interface Slot {
  size: number
}

// Three shapes of wrapper so the common node (no operand to size) pays one decrement and one
// compare. Every CLOCK_EVERY units the wall clock is read too: the unit model is calibrated, the
// deadline is the guarantee (a slow or busy machine cannot stretch one evaluation past it).
function tick(): void {
  if (--meter.left < 0 || (--meter.untilClock < 0 && clockOver())) throw exceeded()
}

function clockOver(): boolean {
  meter.untilClock = CLOCK_EVERY
  if (performance.now() <= meter.deadline) return false
  meter.timedOut = true
  return true
}

function charge(size: number): void {
  if (size < SIZE_SHIFT) return
  meter.left -= Math.floor(size / SIZE_SHIFT)
  meter.untilClock -= Math.floor(size / SIZE_SHIFT)
  if (meter.left < 0) throw exceeded()
}

function meteredEvaluate(orig: Fn, slot: Slot | undefined, ops: { kind: 'min' | 'sum'; slots: Slot[] } | undefined): Fn {
  if (!slot && !ops) {
    return function (this: unknown, ev, ast, ctx) {
      tick()
      return orig.call(this, ev, ast, ctx)
    }
  }
  return function (this: unknown, ev, ast, ctx) {
    tick()
    const r = orig.call(this, ev, ast, ctx)
    if (slot) slot.size = sizeOf(r)
    if (ops) {
      let size = ops.kind === 'min' ? Infinity : 0
      for (const s of ops.slots) size = ops.kind === 'min' ? Math.min(size, s.size) : size + s.size
      charge(size)
    }
    return r
  }
}

/**
 * Meters every node of a checked expression in place (once, before its first evaluation: the
 * engine resolves `meta.evaluate` on first use). Evaluate it only inside `withCelBudget`.
 */
export function instrumentCel(ast: unknown): void {
  const seen = new Set<Node>()
  const slots = new Map<Node, Slot>()
  const slotOf = (n: Node): Slot => {
    let s = slots.get(n)
    if (!s) slots.set(n, (s = { size: 0 }))
    return s
  }
  const visit = (n: Node): void => {
    if (seen.has(n)) return
    seen.add(n)
    const m = n.meta
    if (m.alternate) return visit(m.alternate)
    if (m.macro) {
      const mac = m.macro
      const orig = mac.evaluate
      mac.evaluate = meteredEvaluate(orig, slots.get(n), undefined)
      for (const c of [mac.val, mac.exp, ...(mac.args ?? [])]) if (isNode(c)) visit(c)
      return
    }
    const ops = operands(n)
    if (ops) for (const o of ops.nodes) slotOf(o)
    if (n.op === 'comprehension') {
      const a = n.args as ComprehensionArgs
      // The engine's quantifiers swallow errors of a step (CEL's error semantics), so the loop
      // itself must stop: its condition runs outside that catch.
      const cond = a.condition
      a.condition = (accu) => {
        if (meter.left < 0) throw exceeded()
        return cond ? cond(accu) : true
      }
    }
    if (m.evaluate) n.setMeta('evaluate', meteredEvaluate(m.evaluate, slots.get(n), ops && { kind: ops.kind, slots: ops.nodes.map(slotOf) }))
    for (const c of childNodes(n)) visit(c)
  }
  visit(ast as Node)
}

function childNodes(n: Node): Node[] {
  if (n.op === 'comprehension') return [n.args.iterable, n.args.init, n.args.step]
  const out: Node[] = []
  const add = (v: unknown): void => {
    if (isNode(v)) out.push(v)
    else if (Array.isArray(v)) v.forEach(add)
  }
  add(n.args)
  return out
}
