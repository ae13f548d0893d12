// The engine's internal AST, as far as the cost model reads it, and the one rule both the
// estimate (cel-cost.ts) and the meter (cel-meter.ts) follow: which operands an operation pays for.
// `@marcbachmann/cel-js` 8.0.0 exposes `meta` (`alternate` for an expanded macro, `macro` for
// has/bind, `evaluate`) publicly but not in its types; a version bump must re-run
// test/policy/cel-cost.test.ts, whose property test catches a node the model no longer sees.

/** One unit per this many characters or elements an operation touches. */
export const SIZE_SHIFT = 4

export type Fn = (this: unknown, ev: unknown, ast: unknown, ctx: unknown) => unknown
export interface Macro {
  evaluate: Fn
  args?: Node[]
  val?: Node
  exp?: Node
  var?: string
}
export interface ComprehensionArgs {
  iterable: Node
  init: Node
  step: Node
  iterVarName: string
  kind?: string
  condition?: (accu: unknown) => boolean
}
/** The engine's node (public in the package, not in its types). */
export interface Node {
  op: string
  args: any // any: the engine's own node types are not exported
  meta: { evaluate?: Fn; alternate?: Node; macro?: Macro }
  setMeta(key: string, value: unknown): Node
}

export const COMPARISONS = new Set(['==', '!=', '<', '<=', '>', '>='])
export const NUMERIC = new Set(['-', '*', '/', '%'])

export function isNode(v: unknown): v is Node {
  return typeof v === 'object' && v !== null && 'op' in v && 'meta' in v
}

// An expanded macro is evaluated as its alternate (the comprehension), so that node's result is the one to size.
const evaluated = (n: Node): Node => n.meta.alternate ?? n

/** The operands whose size an operation pays for: all of them (`sum`) or the smaller (`min`, comparisons). */
export function operands(n: Node): { kind: 'min' | 'sum'; nodes: Node[] } | undefined {
  const found = operandNodes(n)
  return found && { kind: found.kind, nodes: found.nodes.map(evaluated) }
}

/** `list.join(sep)`: the receiver and the separator, whose product bounds the string it builds. */
export function joinParts(n: Node): [Node, Node] | undefined {
  if (n.meta.alternate || n.meta.macro || n.op !== 'rcall' || n.args[0] !== 'join' || n.args[2].length !== 1) return undefined
  return [evaluated(n.args[1]), evaluated(n.args[2][0])]
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

export function childNodes(n: Node): Node[] {
  if (n.op === 'comprehension') return [n.args.iterable, n.args.init, n.args.step]
  const out: Node[] = []
  const add = (v: unknown): void => {
    if (isNode(v)) out.push(v)
    else if (Array.isArray(v)) v.forEach(add)
  }
  add(n.args)
  return out
}
