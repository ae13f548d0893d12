// The CEL cost model (src/policy/cel-cost.ts): the save-time estimate multiplies through nesting
// and growth, the run-time meter stops what goes over its budget (and cannot be swallowed by CEL's
// error-absorbing operators), and — property-tested over generated expressions — the estimate is
// an upper bound of what the meter measures for inputs within CEL_INPUT_BOUND.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { compileCel, type CelProgram } from '../../src/policy/cel.js'
import { compilePolicy } from '../../src/policy/index.js'
import { CEL_CALL_BUDGET, CEL_EXPR_COST_LIMIT } from '../../src/policy/cel-cost.js'
import { CelBudgetExceeded, lastCelSpend, withCelBudget } from '../../src/policy/cel-meter.js'

const L10 = '[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]'
const ctx = { workspace: { id: 'w', org_id: 'o', role: 'r', environment: 'e' }, task: { id: '' } }
const request = (body: unknown = null, path = '/v1/a') => ({ method: 'POST', path, host: 'a.example', scheme: 'https', headers: { 'x-a': 'abc' }, raw_query: '', query: {}, body })

function program(src: string): CelProgram {
  const r = compileCel(src, 'match_body', 'bool')
  if (!r.ok) throw new Error(`${src}: ${JSON.stringify(r.issues)}`)
  return r.program
}

function refusal(src: string, site: Parameters<typeof compileCel>[1] = 'match_body', kind: Parameters<typeof compileCel>[2] = 'bool') {
  const r = compileCel(src, site, kind)
  return r.ok ? undefined : r.issues[0]
}

/** Runs with an unlimited budget and returns [result or error, units spent]. */
function measure(p: CelProgram, vars: Record<string, unknown>): [unknown, number] {
  let out: unknown
  withCelBudget(
    Number.MAX_SAFE_INTEGER,
    () => {
      try {
        out = p.run(vars)
      } catch (e) {
        out = e
      }
    },
    Infinity,
  )
  return [out, lastCelSpend()]
}

const nest = (depth: number, inner: string): string => {
  const vars = 'abcdefgh'.slice(0, depth).split('')
  return vars.reduceRight((acc, v) => `${L10}.all(${v}, ${acc})`, inner.replace('$', vars.join(' + ')))
}

describe('estimate', () => {
  it('multiplies through comprehension nesting: each level of ten costs about ten times more', () => {
    const costs = [1, 2, 3].map((d) => program(nest(d, '$ >= 0')).cost)
    expect(costs[1] / costs[0]).toBeGreaterThan(8)
    expect(costs[2] / costs[1]).toBeGreaterThan(8)
    expect(refusal(nest(4, '$ >= 0'))?.code).toBe('cel_cost_exceeded')
    expect(refusal(nest(4, '$ >= 0'))?.message).toMatch(/may cost [\d,]+ units per evaluation, over the limit of 50,000/)
  })

  it('follows value growth: concatenation under cel.bind, join of mapped strings, split', () => {
    const grow = (levels: number) => {
      let e = 'v0.contains("y")'
      for (let i = levels; i >= 1; i--) e = `cel.bind(v${i - 1}, ${i === 1 ? '"xxxxxxxxxx"' : Array(10).fill(`v${i - 2}`).join(' + ')}, ${e})`
      return e
    }
    expect(program(grow(2)).cost).toBeLessThan(CEL_EXPR_COST_LIMIT)
    expect(refusal(grow(6))?.code).toBe('cel_cost_exceeded')
    const big = `[${Array.from({ length: 200 }, (_, i) => i).join(',')}]`
    expect(refusal(`${big}.map(a, ${big}.map(b, "xxxxxxxxxxxxxxxx").join("")).join("").size() > 0`)?.code).toBe('cel_cost_exceeded')
    expect(refusal(`request.body.s.split("").all(c, request.body.s.split("").exists(d, c == d))`)?.code).toBe('cel_cost_exceeded')
  })

  it('takes inputs at their bound: one pass over the body is accepted, a pass nested in a pass is not', () => {
    expect(program('request.body.items.all(x, x >= 0 && x < 10)').cost).toBeLessThan(CEL_EXPR_COST_LIMIT)
    expect(refusal('request.body.items.all(x, request.body.items.exists(y, x == y))')?.code).toBe('cel_cost_exceeded')
    expect(refusal('request.headers.all(k, request.headers.all(j, k != j || true))', 'match_headers')?.code).toBe('cel_cost_exceeded')
    expect(refusal(`${L10}.map(a, ${L10}.filter(b, ${L10}.exists(c, ${L10}.map(d, a + b + c + d).size() > 0))).size() > 0`)?.code).toBe('cel_cost_exceeded')
    expect(refusal(`${nest(3, '$ >= 0')} ? "a" : "b"`, 'transform_header', 'string')).toBeUndefined()
    expect(refusal(`${nest(5, '$ >= 0')} ? "a" : "b"`, 'transform_header', 'string')?.code).toBe('cel_cost_exceeded')
  })
})

describe('meter', () => {
  it('denies an evaluation that goes over its budget, whatever the engine would have answered', () => {
    const p = program('request.body.items.all(x, x >= 0)')
    const items = Array.from({ length: 300_000 }, () => 1)
    expect(() => p.run({ request: request({ items }), ...ctx })).toThrow(CelBudgetExceeded)
    expect(() => p.run({ request: request({ items }), ...ctx })).toThrow(/exceeded its (cost|time) budget/)
    expect(p.run({ request: request({ items: items.slice(0, 100) }), ...ctx })).toBe(true)
  })

  it('is not swallowed by ||, && or a quantifier that absorbs step errors', () => {
    const items = Array.from({ length: 300_000 }, (_, i) => i)
    for (const src of ['request.body.items.exists(x, x < 0) || true', 'false && true || request.body.items.all(x, x >= 0) || true', '[1, 2].exists(k, request.body.items.exists(x, x < 0)) || true']) {
      expect(() => program(src).run({ request: request({ items }), ...ctx }), src).toThrow(CelBudgetExceeded)
    }
  })

  it('shares one budget across the evaluations of a scope, and a wall-clock deadline backs it', () => {
    const p = program('request.body.items.all(x, x >= 0)')
    const vars = { request: request({ items: Array.from({ length: 8_000 }, () => 1) }), ...ctx }
    // Units only here: an outer scope without a deadline, so a loaded machine cannot change the verdict.
    expect(withCelBudget(CEL_CALL_BUDGET, () => p.run(vars), Infinity)).toBe(true)
    const results = withCelBudget(400_000, () =>
      Array.from({ length: 10 }, () => {
        try {
          return p.run(vars)
        } catch (e) {
          return e
        }
      }),
      Infinity,
    )
    expect(results.slice(0, 2)).toEqual([true, true])
    expect(results.at(-1)).toBeInstanceOf(CelBudgetExceeded)
    const timed = withCelBudget(Number.MAX_SAFE_INTEGER, () => {
      try {
        return program('request.body.items.all(x, x >= 0)').run({ request: request({ items: Array.from({ length: 2_000_000 }, () => 1) }), ...ctx })
      } catch (e) {
        return e
      }
    }, 1)
    expect(timed).toBeInstanceOf(CelBudgetExceeded)
    expect((timed as CelBudgetExceeded).timedOut).toBe(true)
  })
})

describe('policy evaluators', () => {
  it('a deny explains its rules without evaluating any expression twice', () => {
    const expr = nest(3, '$ >= 0') + ' && request.path == "/never"'
    const res = compilePolicy(`- name: api\n  type: http\n  allow:\n    - domains: [api.example.com]\n      methods: [GET]\n      match: {expr: '${expr}'}\n`)
    if (!res.ok) throw new Error(JSON.stringify(res.diagnostics))
    const req = { method: 'GET', scheme: 'https' as const, host: 'api.example.com', path: '/x', rawQuery: '', headers: {} }
    const once = measure(program(expr), { request: request(null, '/x'), ...ctx })[1]
    expect(withCelBudget(CEL_CALL_BUDGET, () => res.policy.admit(req, ctx), Infinity)).toMatchObject({ decision: 'deny', reason: 'no_match', detail: { allowrule_eval: [{ failed: 'match' }] } })
    expect(lastCelSpend()).toBe(once)
  })
})

// ---------------------------------------------------------------------------------------------
// Generated expressions, well-typed by construction: int (I), string (S), list<int> (L),
// list<string> (LS), bool (B). Iteration variables are named by depth so they never shadow.

type Scope = { ints: string[]; strs: string[] }
const pick = <T,>(xs: T[]): fc.Arbitrary<T> => fc.constantFrom(...xs)
const intLit = fc.integer({ min: 0, max: 9 }).map(String)
const strLit = fc.string({ unit: fc.constantFrom('a', 'b', '/', 'x'), maxLength: 6 }).map((s) => JSON.stringify(s))

function I(d: number, s: Scope): fc.Arbitrary<string> {
  const leaves = [intLit, ...(s.ints.length ? [pick(s.ints)] : [])]
  if (d <= 0) return fc.oneof(...leaves)
  return fc.oneof(...leaves, L(d - 1, s).map((l) => `size(${l})`), S(d - 1, s).map((x) => `size(${x})`), fc.tuple(I(d - 1, s), I(d - 1, s)).map(([a, b]) => `(${a} + ${b})`))
}

function S(d: number, s: Scope): fc.Arbitrary<string> {
  const leaves = [strLit, fc.constant('request.path'), ...(s.strs.length ? [pick(s.strs)] : [])]
  if (d <= 0) return fc.oneof(...leaves)
  return fc.oneof(
    ...leaves,
    fc.tuple(S(d - 1, s), S(d - 1, s)).map(([a, b]) => `(${a} + ${b})`),
    LS(d - 1, s).map((l) => `${l}.join("-")`),
    I(d - 1, s).map((i) => `string(${i})`),
    fc.tuple(S(d - 1, s), S(d - 1, { ...s, strs: [...s.strs, `v${d}`] })).map(([v, e]) => `cel.bind(v${d}, ${v}, ${e})`),
  )
}

function L(d: number, s: Scope): fc.Arbitrary<string> {
  const lit = fc.array(intLit, { maxLength: 5 }).map((xs) => `[${xs.join(', ')}]`)
  if (d <= 0) return lit
  const x = `i${d}`
  const inner = { ...s, ints: [...s.ints, x] }
  return fc.oneof(
    lit,
    fc.constant('request.body.nums'),
    fc.tuple(L(d - 1, s), L(d - 1, s)).map(([a, b]) => `(${a} + ${b})`),
    fc.tuple(L(d - 1, s), I(d - 1, inner)).map(([l, e]) => `${l}.map(${x}, ${e})`),
    fc.tuple(L(d - 1, s), B(d - 1, inner)).map(([l, b]) => `${l}.filter(${x}, ${b})`),
  )
}

function LS(d: number, s: Scope): fc.Arbitrary<string> {
  const lit = fc.array(strLit, { maxLength: 4 }).map((xs) => `[${xs.join(', ')}]`)
  if (d <= 0) return fc.oneof(lit, fc.constant('request.body.strs'))
  const x = `i${d}`
  return fc.oneof(lit, S(d - 1, s).map((v) => `${v}.split("/")`), fc.tuple(L(d - 1, s), S(d - 1, { ...s, ints: [...s.ints, x] })).map(([l, e]) => `${l}.map(${x}, ${e})`))
}

function B(d: number, s: Scope): fc.Arbitrary<string> {
  const leaves = [fc.constantFrom('true', 'false'), fc.tuple(I(0, s), I(0, s)).map(([a, b]) => `${a} < ${b}`)]
  if (d <= 0) return fc.oneof(...leaves)
  const x = `i${d}`
  const y = `s${d}`
  return fc.oneof(
    ...leaves,
    fc.tuple(I(d - 1, s), I(d - 1, s)).map(([a, b]) => `${a} == ${b}`),
    fc.tuple(S(d - 1, s), S(d - 1, s)).map(([a, b]) => `${a}.contains(${b})`),
    fc.tuple(S(d - 1, s), S(d - 1, s)).map(([a, b]) => `${a} == ${b}`),
    fc.tuple(I(d - 1, s), L(d - 1, s)).map(([a, l]) => `${a} in ${l}`),
    fc.tuple(pick(['all', 'exists', 'exists_one']), L(d - 1, s), B(d - 1, { ...s, ints: [...s.ints, x] })).map(([q, l, b]) => `${l}.${q}(${x}, ${b})`),
    fc.tuple(LS(d - 1, s), B(d - 1, { ...s, strs: [...s.strs, y] })).map(([l, b]) => `${l}.all(${y}, ${b})`),
    fc.tuple(B(d - 1, s), B(d - 1, s), pick(['&&', '||'])).map(([a, b, op]) => `(${a} ${op} ${b})`),
    fc.tuple(B(d - 1, s), B(d - 1, s), B(d - 1, s)).map(([c, a, b]) => `(${c} ? ${a} : ${b})`),
  )
}

describe('estimate versus meter (fast-check)', () => {
  it('the estimate bounds the measured units for every input within the bound', () => {
    const body = fc.record({
      nums: fc.array(fc.integer({ min: 0, max: 9 }), { maxLength: 40 }),
      strs: fc.array(fc.string({ maxLength: 12 }), { maxLength: 12 }),
    })
    let measured = 0
    fc.assert(
      fc.property(B(4, { ints: [], strs: [] }), body, fc.string({ maxLength: 40 }), (src, b, path) => {
        const r = compileCel(src, 'match_body', 'bool')
        if (!r.ok) return r.issues[0]?.code === 'cel_cost_exceeded' || r.issues[0]?.code === 'cel_type'
        const [, spent] = measure(r.program, { request: request(b, `/${path}`), ...ctx })
        measured++
        return spent <= r.program.cost
      }),
      { numRuns: 300, seed: 1513 },
    )
    expect(measured).toBeGreaterThan(200)
  })
})
