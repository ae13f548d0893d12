// The run-time half of the CEL cost model (cel-cost.ts has the save-time half and the limits):
// every node of a compiled expression is wrapped so each evaluation is metered in the estimate's
// units, against a budget shared by one `withCelBudget` scope and a wall-clock deadline.

import { childNodes, isNode, joinParts, operands, SIZE_SHIFT, type ComprehensionArgs, type Fn, type Node } from './cel-ast.js'
import { CEL_CALL_DEADLINE_MS } from './cel-cost.js'

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

const OBJECT_COUNT_CAP = 1 << 16
const CLOCK_EVERY = 2048
const FIRST_CLOCK = 512
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
  openScope(budget, deadlineMs)
  try {
    return fn()
  } finally {
    closeScope(budget)
  }
}

/**
 * withCelBudget over `fn.call(self, a, b)`: the proxy's per-request evaluators (a policy's
 * admission, body check and transforms) pass their method and arguments instead of a closure
 * made per call.
 */
export function withCelBudgetCall<S, A, B, T>(budget: number, self: S, fn: (this: S, a: A, b: B) => T, a: A, b: B): T {
  if (meter.depth > 0) return fn.call(self, a, b)
  openScope(budget, CEL_CALL_DEADLINE_MS)
  try {
    return fn.call(self, a, b)
  } finally {
    closeScope(budget)
  }
}

function openScope(budget: number, deadlineMs: number): void {
  meter.depth = 1
  meter.left = budget
  meter.budget = budget
  // The clock is first read after FIRST_CLOCK units: the usual expression never pays for it.
  meter.deadline = -1
  meter.deadlineMs = deadlineMs
  meter.untilClock = FIRST_CLOCK
  meter.timedOut = false
}

function closeScope(budget: number): void {
  meter.spent = budget - Math.max(meter.left, 0)
  meter.depth = 0
}

/** Whether a budget scope is open (withCelBudget would just call its function). */
export function celBudgetOpen(): boolean {
  return meter.depth > 0
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
  const now = performance.now()
  if (meter.deadline < 0) {
    meter.deadline = now + meter.deadlineMs
    return false
  }
  if (now <= meter.deadline) return false
  meter.timedOut = true
  return true
}

function charge(size: number): void {
  if (size < SIZE_SHIFT) return
  meter.left -= Math.floor(size / SIZE_SHIFT)
  meter.untilClock -= Math.floor(size / SIZE_SHIFT)
  if (meter.left < 0) throw exceeded()
}

/** What one node's wrapper does besides counting itself. */
interface Plan {
  /** Record the result's size, for a parent that compares. */
  slot?: Slot
  /** Charge the result's size as soon as it exists: the parent is about to touch all of it. */
  pre?: boolean
  /** A join separator: also charge (receiver elements × separator length), the string join builds. */
  times?: Slot
  /** A comparison: once it ran, charge the smaller operand (equality stops at the first difference). */
  min?: Slot[]
}

function meteredEvaluate(orig: Fn, plan: Plan): Fn {
  if (!plan.slot && !plan.pre && !plan.times && !plan.min) {
    return function (this: unknown, ev, ast, ctx) {
      tick()
      return orig.call(this, ev, ast, ctx)
    }
  }
  return function (this: unknown, ev, ast, ctx) {
    tick()
    const r = orig.call(this, ev, ast, ctx)
    if (plan.slot || plan.pre || plan.times) {
      const size = sizeOf(r)
      if (plan.slot) plan.slot.size = size
      if (plan.pre) charge(size)
      if (plan.times) charge(plan.times.size * size)
    }
    if (plan.min) {
      let size = Infinity
      for (const s of plan.min) size = Math.min(size, s.size)
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
  const plans = new Map<Node, Plan>()
  const planOf = (n: Node): Plan => {
    let p = plans.get(n)
    if (!p) plans.set(n, (p = {}))
    return p
  }
  // A parent is visited before its children, so a child's plan is complete when it is wrapped.
  const visit = (n: Node): void => {
    if (seen.has(n)) return
    seen.add(n)
    const m = n.meta
    if (m.alternate) return visit(m.alternate)
    if (m.macro) {
      const mac = m.macro
      mac.evaluate = meteredEvaluate(mac.evaluate, planOf(n))
      for (const c of [mac.val, mac.exp, ...(mac.args ?? [])]) if (isNode(c)) visit(c)
      return
    }
    const ops = operands(n)
    if (ops?.kind === 'sum') for (const o of ops.nodes) planOf(o).pre = true
    if (ops?.kind === 'min') planOf(n).min = ops.nodes.map((o) => (planOf(o).slot ??= { size: 0 }))
    const join = joinParts(n)
    if (join) planOf(join[1]).times = planOf(join[0]).slot ??= { size: 0 }
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
    if (m.evaluate) n.setMeta('evaluate', meteredEvaluate(m.evaluate, planOf(n)))
    for (const c of childNodes(n)) visit(c)
  }
  visit(ast as Node)
}
