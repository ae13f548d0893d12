import { describe, expect, it } from 'vitest'
import { celToAmount, compileCel } from '../../src/policy/cel.js'

const request = { method: 'GET', path: '/v1/aaa', host: 'a.example', scheme: 'https', headers: { 'x-a': 'abc' }, raw_query: '', query: {} }
const ctx = { workspace: { id: 'w', org_id: 'o', role: 'r', environment: 'e' }, task: { id: '' } }

describe('compileCel', () => {
  it('rewrites nested matches() onto RE2', () => {
    const res = compileCel('request.path.matches("^/v1/" + (request.headers["x-a"].matches("b") ? "a+" : "z")) && !request.host.matches("(x|x)+y")', 'match_headers', 'bool')
    if (!res.ok) throw new Error(JSON.stringify(res.issues))
    expect(res.program.run({ request, ...ctx })).toBe(true)
    expect(res.program.run({ request: { ...request, path: '/v1/zzz' }, ...ctx })).toBe(false)
  })

  it('maps checker errors to our codes and messages', () => {
    const issue = (src: string, site: Parameters<typeof compileCel>[1] = 'match_headers', kind: Parameters<typeof compileCel>[2] = 'bool') => {
      const r = compileCel(src, site, kind)
      return r.ok ? undefined : r.issues[0]
    }
    expect(issue('nope == 1')).toEqual({ code: 'cel_undeclared', message: 'undeclared reference: nope' })
    expect(issue('request.bogus == "x"')).toEqual({ code: 'cel_undeclared', message: 'undeclared reference: request.bogus' })
    expect(issue('workspace.name == "x"')).toEqual({ code: 'cel_undeclared', message: 'undeclared reference: workspace.name' })
    expect(issue('request.method ==')?.code).toBe('cel_syntax')
    expect(issue('request.method')?.code).toBe('cel_result_type')
    expect(issue('response.status == 200')).toEqual({ code: 'cel_undeclared', message: 'undeclared reference: response' })
    expect(issue('request.method == "GET"', 'counter_headers', 'number')).toEqual({ code: 'cel_undeclared', message: 'undeclared reference: request' })
    expect(issue('secrets["a"] + request.path', 'transform_path', 'string')?.code).toBe('cel_secrets_not_allowed')
    expect(issue('size(secrets) > 0 ? "a" : "b"', 'transform_header', 'string')?.code).toBe('cel_secrets_dynamic_key')
    expect(issue('request.path.matches("(a")')?.code).toBe('cel_invalid_regex')
    expect(issue('{"a": 1}', 'transform_body', 'map')).toBeUndefined()
    expect(issue('"a"', 'transform_body', 'map')?.code).toBe('cel_result_type')
  })

  it('records the literal secret keys an expression reads', () => {
    const r = compileCel('secrets["a"] + secrets.b + secrets["a"]', 'transform_header', 'string')
    expect(r.ok && [...r.program.secretKeys].sort()).toEqual(['a', 'b'])
  })

  it('converts CEL numbers to non-negative integer amounts', () => {
    expect(celToAmount(5n)).toBe(5)
    expect(celToAmount(5.9)).toBe(5)
    expect(celToAmount(-1n)).toBeUndefined()
    expect(celToAmount(-0.5)).toBeUndefined()
    expect(celToAmount(Number.NaN)).toBeUndefined()
    expect(celToAmount('5')).toBeUndefined()
    expect(celToAmount(2n ** 70n)).toBe(Number.MAX_SAFE_INTEGER)
  })
})
